#include "sacplan/planner/solver.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "candidates.h"
#include "sacplan/planner/bytes.h"

namespace sacplan {

struct Solver::BlockClass {
  const Block* representative = nullptr;
  std::vector<BlockCandidate> candidates;
};

namespace {

// Memory that is live whatever the plan, at the moments the chain DP checks.
struct StepConstants {
  int64_t forward_base = 0;               // + P_j + forward peak of block j
  std::vector<int64_t> backward_base;     // per block: + P_j + backward peak
  int64_t head_base = 0;                  // + P_L (every block's kept bytes)
  int64_t plan_independent_peak = 0;      // setup and optimizer moments
};

StepConstants ComputeConstants(const AnalyzedModel& model) {
  const FixedMemory& fixed = model.model->fixed;
  const int block_count = static_cast<int>(model.blocks.size());
  StepConstants c;
  const int64_t resident = fixed.param_bytes + fixed.optimizer_state_bytes +
                           model.shared_input_bytes;
  c.forward_base = resident;
  const BlockAnalysis& last = model.blocks.back();
  const int64_t last_out = last.tensors[last.output].bytes;
  c.head_base = resident + 2 * last_out + fixed.head_bytes +
                fixed.nonblock_grad_bytes + model.shared_input_grad_bytes;
  c.backward_base.assign(block_count, 0);
  int64_t later_param_grads = 0;
  for (int b = block_count - 1; b >= 0; --b) {
    c.backward_base[b] = resident + model.shared_input_grad_bytes +
                         fixed.nonblock_grad_bytes + later_param_grads;
    later_param_grads += model.blocks[b].param_bytes;
  }
  const BlockAnalysis& first = model.blocks.front();
  c.plan_independent_peak = std::max(
      resident + first.tensors[first.carried_input].bytes,
      resident + later_param_grads + fixed.nonblock_grad_bytes +
          fixed.optimizer_step_bytes);
  return c;
}

// One state of the chain DP: kept bytes of the blocks so far, a value to
// minimise (time, or the running peak) and how it was reached.
struct ChainState {
  int64_t prefix_kept_bytes = 0;
  double value = 0;
  int parent = -1;     // state index in the previous layer
  int candidate = -1;  // candidate chosen for the block of this layer
};

void PruneStates(std::vector<ChainState>& states) {
  std::sort(states.begin(), states.end(),
            [](const ChainState& a, const ChainState& b) {
              if (a.prefix_kept_bytes != b.prefix_kept_bytes)
                return a.prefix_kept_bytes < b.prefix_kept_bytes;
              return a.value < b.value;
            });
  std::vector<ChainState> kept;
  for (const ChainState& s : states) {
    if (!kept.empty() && s.value >= kept.back().value) continue;
    kept.push_back(s);
  }
  states = std::move(kept);
}

}  // namespace

absl::StatusOr<Solver> Solver::Create(const AnalyzedModel& model,
                                      const SolverOptions& options) {
  Solver solver;
  solver.model_ = &model;
  solver.options_ = options;
  for (size_t b = 0; b < model.blocks.size(); ++b) {
    const Block& block = model.model->blocks[b];
    BlockClass* match = nullptr;
    for (const auto& cls : solver.classes_) {
      if (SameStructure(*cls->representative, block)) match = cls.get();
    }
    if (match == nullptr) {
      auto cls = std::make_shared<BlockClass>();
      cls->representative = &block;
      const BlockAnalysis& analysis = model.blocks[b];
      int free_ops = 0;
      for (const OpNode& op : analysis.ops) free_ops += op.collective ? 0 : 1;
      const std::vector<SaveMask> masks =
          free_ops <= options.exhaustive_max_ops
              ? AllSaveMasks(analysis)
              : WithNeighbours(analysis,
                               FrontierSaveMasks(analysis, options.semantics));
      cls->candidates = ParetoCandidates(analysis, masks, options.semantics);
      match = cls.get();
      solver.classes_.push_back(std::move(cls));
    }
    solver.block_class_.push_back(match);
  }
  solver.min_peak_ = solver.ChainMinPeak();
  auto fastest = solver.ChainSolve(std::numeric_limits<int64_t>::max());
  solver.max_useful_peak_ = fastest->result.peak_bytes;
  return solver;
}

std::vector<int> Solver::CandidateCounts() const {
  std::vector<int> counts;
  for (const BlockClass* cls : block_class_) {
    counts.push_back(static_cast<int>(cls->candidates.size()));
  }
  return counts;
}

int64_t Solver::MinPeakBytes() const { return min_peak_; }
int64_t Solver::MaxUsefulPeakBytes() const { return max_useful_peak_; }

// Least achievable peak: the chain DP with the running peak as the value.
int64_t Solver::ChainMinPeak() const {
  const StepConstants c = ComputeConstants(*model_);
  std::vector<ChainState> states{
      {0, static_cast<double>(c.plan_independent_peak), -1, -1}};
  for (size_t b = 0; b < block_class_.size(); ++b) {
    std::vector<ChainState> next;
    for (const ChainState& s : states) {
      for (const BlockCandidate& cand : block_class_[b]->candidates) {
        const int64_t moment = s.prefix_kept_bytes + std::max(
            c.forward_base + cand.cost.forward_peak_bytes,
            c.backward_base[b] + cand.cost.backward_peak_bytes);
        next.push_back({s.prefix_kept_bytes + cand.cost.kept_bytes,
                        std::max(s.value, static_cast<double>(moment)), -1, -1});
      }
    }
    PruneStates(next);
    states = std::move(next);
  }
  int64_t best = std::numeric_limits<int64_t>::max();
  for (const ChainState& s : states) {
    best = std::min(best, std::max(static_cast<int64_t>(s.value),
                                   s.prefix_kept_bytes + c.head_base));
  }
  return best;
}

absl::StatusOr<SolvedPlan> Solver::ChainSolve(int64_t budget_bytes) const {
  const StepConstants c = ComputeConstants(*model_);
  const int block_count = static_cast<int>(block_class_.size());
  if (c.plan_independent_peak > budget_bytes) {
    return absl::FailedPreconditionError("budget below plan-independent memory");
  }
  std::vector<std::vector<ChainState>> layers(block_count + 1);
  layers[0] = {{0, 0.0, -1, -1}};
  for (int b = 0; b < block_count; ++b) {
    std::vector<ChainState>& next = layers[b + 1];
    const std::vector<BlockCandidate>& candidates = block_class_[b]->candidates;
    for (int si = 0; si < static_cast<int>(layers[b].size()); ++si) {
      const ChainState& s = layers[b][si];
      for (int ci = 0; ci < static_cast<int>(candidates.size()); ++ci) {
        const BlockCost& cost = candidates[ci].cost;
        if (s.prefix_kept_bytes + c.forward_base + cost.forward_peak_bytes >
                budget_bytes ||
            s.prefix_kept_bytes + c.backward_base[b] + cost.backward_peak_bytes >
                budget_bytes) {
          continue;
        }
        next.push_back({s.prefix_kept_bytes + cost.kept_bytes,
                        s.value + cost.recompute_ms, si, ci});
      }
    }
    PruneStates(next);
  }
  int best = -1;
  const std::vector<ChainState>& final_states = layers[block_count];
  for (int si = 0; si < static_cast<int>(final_states.size()); ++si) {
    const ChainState& s = final_states[si];
    if (s.prefix_kept_bytes + c.head_base > budget_bytes) continue;
    if (best < 0 || s.value < final_states[best].value) best = si;
  }
  if (best < 0) {
    return absl::FailedPreconditionError("no plan fits the budget");
  }
  SolvedPlan plan;
  plan.masks.resize(block_count);
  for (int b = block_count, si = best; b > 0; --b) {
    const ChainState& s = layers[b][si];
    plan.masks[b - 1] = block_class_[b - 1]->candidates[s.candidate].mask;
    si = s.parent;
  }
  auto result = SimulateStep(*model_, plan.masks, options_.semantics);
  if (!result.ok()) return result.status();
  plan.result = *std::move(result);
  if (plan.result.peak_bytes > budget_bytes) {
    return absl::InternalError(absl::StrCat(
        "solver and simulator disagree: plan peak ", plan.result.peak_bytes,
        " exceeds budget ", budget_bytes));
  }
  return plan;
}

absl::StatusOr<SolvedPlan> Solver::Solve(int64_t budget_bytes) const {
  if (budget_bytes < min_peak_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "budget ", FormatBytes(budget_bytes), " (", budget_bytes,
        " bytes) is below the smallest feasible peak ", FormatBytes(min_peak_),
        " (", min_peak_, " bytes) for this model and semantics"));
  }
  return ChainSolve(budget_bytes);
}

std::vector<SolvedPlan> Solver::Frontier(int points) const {
  points = std::max(points, 2);
  std::vector<SolvedPlan> plans;
  for (int i = 0; i < points; ++i) {
    const int64_t budget =
        min_peak_ + static_cast<int64_t>(
                        static_cast<long double>(max_useful_peak_ - min_peak_) *
                        i / (points - 1));
    auto plan = ChainSolve(budget);
    if (plan.ok()) plans.push_back(*std::move(plan));
  }
  std::sort(plans.begin(), plans.end(),
            [](const SolvedPlan& a, const SolvedPlan& b) {
              if (a.result.peak_bytes != b.result.peak_bytes)
                return a.result.peak_bytes < b.result.peak_bytes;
              return a.result.step_ms < b.result.step_ms;
            });
  std::vector<SolvedPlan> frontier;
  for (SolvedPlan& plan : plans) {
    if (!frontier.empty() &&
        plan.result.step_ms >= frontier.back().result.step_ms) {
      continue;
    }
    frontier.push_back(std::move(plan));
  }
  return frontier;
}

}  // namespace sacplan
