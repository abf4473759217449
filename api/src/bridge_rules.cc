#include "sacplan/api/bridge_rules.h"

#include "absl/strings/str_cat.h"
#include "command_parts.h"
#include "sacplan/planner/plan_io/json_reader.h"
#include "sacplan/status_macros.h"

namespace sacplan::api {
namespace {

// The ops whose outputs plain autograd keeps for backward (some op's
// backward reads them), in forward order.
std::vector<std::string> AutogradKeeps(const BlockAnalysis& block) {
  std::vector<std::string> ops;
  for (size_t k = 0; k < block.ops.size(); ++k) {
    for (int out : block.ops[k].outputs) {
      if (block.tensors[out].needed_by_backward) {
        ops.push_back(block.op_ids[k]);
        break;
      }
    }
  }
  return ops;
}

}  // namespace

absl::StatusOr<std::string> AppliedBlocksJson(const Plan& plan, const LoadedProfile* loaded,
                                              const std::string& plan_name) {
  std::vector<SaveMask> masks;
  if (loaded != nullptr) {
    // Simulate's checks, as `sacplan simulate` makes them.
    RETURN_IF_ERROR(SimulateChecks(*loaded, plan, plan_name));
    ASSIGN_OR_RETURN(masks, MasksFromPlan(loaded->analyzed, plan));
  }
  const std::vector<ActedTriggers> triggers = TriggersActedAt(plan);
  nlohmann::json blocks = nlohmann::json::array();
  for (size_t i = 0; i < plan.blocks.size(); ++i) blocks.push_back(nullptr);
  for (const BlockPlan& block : plan.blocks) {
    std::vector<std::string> recompute = block.recompute.value_or(std::vector<std::string>());
    bool checkpoint = StatedCheckpoint(block);
    if (loaded != nullptr) {
      const BlockAnalysis& analysis = loaded->analyzed.blocks[block.index];
      recompute.clear();
      for (int k : UnsavedOps(analysis, masks[block.index])) {
        recompute.push_back(analysis.op_ids[k]);
      }
      checkpoint = !recompute.empty();
    }
    const ActedTriggers& acted = triggers[block.index];
    nlohmann::json& entry = blocks[block.index];
    entry = {{"index", block.index},
             {"save", block.save},
             {"recompute", recompute},
             {"offload", block.offload},
             {"checkpoint", checkpoint},
             {"spill_trigger", acted.spill_trigger},
             {"lead_trigger", acted.lead_trigger},
             {"block_before_leads", acted.block_before_leads}};
    if (loaded != nullptr) {
      entry["autograd_keeps"] = AutogradKeeps(loaded->analyzed.blocks[block.index]);
    }
  }
  return nlohmann::json{{"semantics", SemanticsName(plan.semantics)}, {"blocks", blocks}}.dump();
}

absl::Status CheckRandomDraws(int index,
                              const std::vector<std::pair<std::string, bool>>& draws) {
  // The block as far as the rule reads it: its random ops, in order.
  BlockAnalysis block;
  SaveMask saved;
  for (const auto& [op_id, was_saved] : draws) {
    block.ops.emplace_back().random = true;
    block.op_ids.push_back(op_id);
    saved.push_back(was_saved);
  }
  return CheckRandomReplay(block, saved, index);
}

absl::Status CheckPlanFitsModel(const Plan& plan, const std::string& model_name,
                                const nlohmann::json& model_config) {
  if (!model_name.empty() && !plan.model_name.empty() && plan.model_name != model_name) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan is for model '", plan.model_name, "', not '", model_name, "'"));
  }
  const nlohmann::json* framework = json_reader::Find(model_config, "framework");
  if (framework != nullptr && !plan.model_config.empty() &&
      json_reader::Find(plan.model_config, "framework") == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plan is for another model: '", plan.model_name, "' was not captured from ",
        framework->is_string() ? framework->get<std::string>() : framework->dump(),
        " (its model_config names no framework); capture this model and plan its profile"));
  }
  const nlohmann::json* blocks = json_reader::Find(model_config, "blocks");
  if (blocks != nullptr && *blocks != plan.blocks.size()) {
    return absl::InvalidArgumentError(absl::StrCat("plan has ", plan.blocks.size(),
                                                   " blocks, the model has ", blocks->dump()));
  }
  return CheckModelConfigMatches(plan, model_config, "this model");
}

}  // namespace sacplan::api
