#include "sacplan/executor/executor.h"

#include <time.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "block_stack.h"
#include "sacplan/status_macros.h"

namespace sacplan {

struct PlanExecutor::Counters : executor_internal::RecomputeCounter {};

namespace {

// A plan made for another shape of the same model would run, but its
// prediction would be wrong: compare every config field the plan recorded.
absl::Status CheckPlanModel(const TorchModel& model, const Plan& plan) {
  const ModelConfig& config = model.config();
  if (!plan.model_name.empty() && plan.model_name != config.name) {
    return absl::InvalidArgumentError(
        absl::StrCat("the plan is for model '", plan.model_name,
                     "' but the model is '", config.name, "'"));
  }
  const nlohmann::json actual = config.ToJson();
  for (const auto& [key, value] : plan.model_config.items()) {
    if (!actual.contains(key) || actual[key] == value) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "the plan was made for ", config.name, " with ", key, "=", value.dump(),
        " but the model has ", key, "=", actual[key].dump(),
        " (profile and plan this shape, or pass the same model options)"));
  }
  return absl::OkStatus();
}

}  // namespace

PlanExecutor::PlanExecutor(const TorchModel& model, std::vector<SaveMask> masks,
                           Semantics semantics, std::shared_ptr<const Model> timed,
                           AnalyzedModel analyzed, std::vector<OffloadMask> offloaded,
                           const CopyReplay& replay)
    : model_(model),
      masks_(std::move(masks)),
      semantics_(semantics),
      timed_(std::move(timed)),
      analyzed_(std::move(analyzed)),
      counters_(std::make_shared<Counters>()) {
  for (size_t b = 0; b < analyzed_.blocks.size(); ++b) {
    const bool moves = b < offloaded.size() && !offloaded[b].empty();
    schedules_.push_back(
        moves ? LowerBlock(analyzed_.blocks[b], masks_[b], semantics_, offloaded[b],
                           analyzed_.model->host_link,
                           WindowsOf(analyzed_.blocks, static_cast<int>(b), replay))
              : LowerBlock(analyzed_.blocks[b], masks_[b], semantics_));
  }
}

int64_t PlanExecutor::last_host_peak_bytes() const { return counters_->host->peak; }

absl::StatusOr<std::unique_ptr<PlanExecutor>> PlanExecutor::Create(
    const TorchModel& model, std::vector<SaveMask> masks, Semantics semantics) {
  return Create(model, std::move(masks), semantics, model.graph(), {});
}

absl::StatusOr<std::unique_ptr<PlanExecutor>> PlanExecutor::Create(
    const TorchModel& model, std::vector<SaveMask> masks, Semantics semantics,
    const Model& timed, std::vector<OffloadMask> offloaded, CopyReplay replay) {
  ASSIGN_OR_RETURN(AnalyzedModel analyzed, AnalyzeModel(model.graph()));
  if (masks.size() != analyzed.blocks.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plan has ", masks.size(), " blocks, the model has ", analyzed.blocks.size()));
  }
  for (size_t b = 0; b < masks.size(); ++b) {
    // The built-in models (models/) carry one stream; BlockStack passes one
    // tensor from block to block.
    if (analyzed.blocks[b].outputs.size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "blocks[", b, "] carries ", analyzed.blocks[b].outputs.size(),
          " streams; the executor runs single-stream blocks only"));
    }
    if (masks[b].size() != analyzed.blocks[b].ops.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan block ", b, " decides ", masks[b].size(),
                       " ops, the model's block has ", analyzed.blocks[b].ops.size()));
    }
  }
  const bool offloads = std::any_of(offloaded.begin(), offloaded.end(), [](const auto& mask) {
    return std::find(mask.begin(), mask.end(), true) != mask.end();
  });
  if (!offloads) {
    return std::unique_ptr<PlanExecutor>(
        new PlanExecutor(model, std::move(masks), semantics, nullptr, std::move(analyzed), {}, {}));
  }
  if (GraphFingerprint(timed) != GraphFingerprint(model.graph())) {
    return absl::InvalidArgumentError(
        "the profile given for offload is of another op graph than the model's");
  }
  auto graph = std::make_shared<const Model>(timed);
  ASSIGN_OR_RETURN(AnalyzedModel timed_analysis, AnalyzeModel(*graph));
  RETURN_IF_ERROR(CheckOffloadMasks(timed_analysis, offloaded));
  if ((!replay.leads.empty() && replay.leads.size() != masks.size()) ||
      (!replay.triggers.empty() && replay.triggers.size() != masks.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("a copy replay of ", replay.triggers.size(), " blocks for ", masks.size()));
  }
  return std::unique_ptr<PlanExecutor>(
      new PlanExecutor(model, std::move(masks), semantics, std::move(graph),
                       std::move(timed_analysis), std::move(offloaded), replay));
}

absl::StatusOr<std::unique_ptr<PlanExecutor>> PlanExecutor::FromPlan(
    const TorchModel& model, const Plan& plan, const Profile* profile) {
  RETURN_IF_ERROR(CheckPlanModel(model, plan));
  ASSIGN_OR_RETURN(const AnalyzedModel analyzed, AnalyzeModel(model.graph()));
  ASSIGN_OR_RETURN(std::vector<SaveMask> masks, MasksFromPlan(analyzed, plan));
  if (!PlanOffloads(plan)) return Create(model, std::move(masks), plan.semantics);
  if (profile == nullptr) {
    return absl::InvalidArgumentError(
        "plan offloads to the host: give the profile it was made from too (its times and "
        "host link decide when each copy is made)");
  }
  RETURN_IF_ERROR(CheckPlanMatches(plan, *profile));
  ASSIGN_OR_RETURN(const AnalyzedModel timed, AnalyzeModel(profile->model));
  ASSIGN_OR_RETURN(std::vector<OffloadMask> offloaded, OffloadMasksFromPlan(timed, plan, masks));
  ASSIGN_OR_RETURN(CopyReplay replay, CopyReplayOfPlan(timed, plan));
  return Create(model, std::move(masks), plan.semantics, profile->model, std::move(offloaded),
                std::move(replay));
}

at::Tensor PlanExecutor::Loss(const Batch& batch, BlockStackInputs* inputs_out) {
  BlockStackInputs inputs = model_.Embed(batch);
  if (inputs_out != nullptr) *inputs_out = inputs;
  at::Tensor last =
      executor_internal::RunBlockStack(model_, analyzed_, schedules_, inputs, counters_,
                                       &moment_observer_);
  return model_.Loss(last, inputs, batch);
}

void PlanExecutor::set_moment_observer(
    std::function<void(const StepLocation&)> observer) {
  moment_observer_ = std::move(observer);
}

int PlanExecutor::last_recomputed_ops() const { return counters_->recomputed_ops; }

double ProcessCpuMs() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return 1e3 * static_cast<double>(now.tv_sec) + 1e-6 * static_cast<double>(now.tv_nsec);
}

void PlanExecutor::set_op_observer(OpObserver observer) {
  counters_->observer = std::move(observer);
}

int PlanExecutor::planned_recomputed_ops() const {
  int total = 0;
  for (const BlockSchedule& schedule : schedules_) total += schedule.recomputed_ops;
  return total;
}

}  // namespace sacplan
