#include "sacplan/planner/plan.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "json_fields.h"
#include "sacplan/planner/atomic_file.h"

namespace sacplan {

using json_fields::json;

std::vector<BlockPlan> BlockPlansFromMasks(const AnalyzedModel& model,
                                           const std::vector<SaveMask>& masks) {
  std::vector<BlockPlan> blocks;
  for (size_t b = 0; b < masks.size(); ++b) {
    BlockPlan block{static_cast<int>(b), {}};
    for (size_t k = 0; k < masks[b].size(); ++k) {
      if (masks[b][k]) block.save.push_back(model.blocks[b].op_ids[k]);
    }
    blocks.push_back(std::move(block));
  }
  return blocks;
}

absl::StatusOr<std::vector<SaveMask>> MasksFromPlan(const AnalyzedModel& model,
                                                    const Plan& plan) {
  if (plan.blocks.size() != model.blocks.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plan has ", plan.blocks.size(), " blocks but the model has ",
        model.blocks.size()));
  }
  std::vector<SaveMask> masks(model.blocks.size());
  for (size_t b = 0; b < model.blocks.size(); ++b) {
    masks[b].assign(model.blocks[b].ops.size(), false);
  }
  std::set<int> seen;
  for (const BlockPlan& block : plan.blocks) {
    if (block.index < 0 || block.index >= static_cast<int>(model.blocks.size()) ||
        !seen.insert(block.index).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "plan block index ", block.index, " is out of range or repeated (model has ",
          model.blocks.size(), " blocks)"));
    }
    const BlockAnalysis& analysis = model.blocks[block.index];
    for (const std::string& id : block.save) {
      const int op = analysis.FindOp(id);
      if (op < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "plan block ", block.index, " saves op '", id,
            "', which the model's block does not have"));
      }
      masks[block.index][op] = true;
    }
    const SaveMask& mask = masks[block.index];
    for (int k = 0; !EveryOpSaved(analysis, mask) && k < analysis.op_count(); ++k) {
      if (mask[k] && analysis.ops[k].never_save) {
        return absl::InvalidArgumentError(absl::StrCat(
            "plan block ", block.index, " saves op '", analysis.op_ids[k],
            "', whose output a later call writes in place (never_save): PyTorch's "
            "selective checkpointing cannot cache it; save every op of the block or "
            "leave this one out"));
      }
    }
  }
  return masks;
}

void SetPrediction(const StepResult& result, Plan& plan) {
  plan.predicted = {result.peak_bytes, result.step_ms, result.recompute_ms};
}

const char* BudgetKindName(BudgetKind kind) {
  return kind == BudgetKind::kReserved ? "reserved" : "allocated";
}

absl::StatusOr<BudgetKind> ParseBudgetKind(const std::string& text) {
  if (text == "allocated") return BudgetKind::kAllocated;
  if (text == "reserved") return BudgetKind::kReserved;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown budget kind '", text, "': expected allocated or reserved"));
}

absl::StatusOr<Plan> PlanFromJson(const json& doc) {
  SACPLAN_RETURN_IF_ERROR(json_fields::RequireObject(doc, "plan"));
  std::string schema;
  SACPLAN_RETURN_IF_ERROR(json_fields::ReadString(doc, "schema", "", true, schema));
  if (schema != kPlanSchema) {
    return json_fields::Error("schema", absl::StrCat("expected \"", kPlanSchema,
                                                     "\", got \"", schema, "\""));
  }
  Plan plan;
  SACPLAN_RETURN_IF_ERROR(
      json_fields::ReadString(doc, "model", "", false, plan.model_name));
  SACPLAN_RETURN_IF_ERROR(json_fields::ReadString(doc, "method", "", false, plan.method));
  if (const json* config = json_fields::Find(doc, "model_config")) {
    SACPLAN_RETURN_IF_ERROR(json_fields::RequireObject(*config, "model_config"));
    plan.model_config = *config;
  }
  SACPLAN_RETURN_IF_ERROR(
      json_fields::ReadInt(doc, "budget_bytes", "", false, plan.budget_bytes));
  if (plan.budget_bytes < 0) return json_fields::Error("budget_bytes", "must be >= 0");
  std::string budget_kind = "allocated";
  SACPLAN_RETURN_IF_ERROR(
      json_fields::ReadString(doc, "budget_kind", "", false, budget_kind));
  auto kind = ParseBudgetKind(budget_kind);
  if (!kind.ok()) return json_fields::Error("budget_kind", std::string(kind.status().message()));
  plan.budget_kind = *kind;
  std::string semantics = "sacplan";
  SACPLAN_RETURN_IF_ERROR(
      json_fields::ReadString(doc, "semantics", "", false, semantics));
  auto parsed = ParseSemantics(semantics);
  if (!parsed.ok()) return json_fields::Error("semantics", std::string(parsed.status().message()));
  plan.semantics = *parsed;
  if (const json* predicted = json_fields::Find(doc, "predicted")) {
    SACPLAN_RETURN_IF_ERROR(json_fields::RequireObject(*predicted, "predicted"));
    SACPLAN_RETURN_IF_ERROR(json_fields::ReadInt(*predicted, "peak_bytes", "predicted",
                                                 false, plan.predicted.peak_bytes));
    SACPLAN_RETURN_IF_ERROR(json_fields::ReadNumber(*predicted, "step_ms", "predicted",
                                                    false, plan.predicted.step_ms));
    SACPLAN_RETURN_IF_ERROR(json_fields::ReadNumber(
        *predicted, "recompute_ms", "predicted", false, plan.predicted.recompute_ms));
    SACPLAN_RETURN_IF_ERROR(json_fields::ReadInt(*predicted, "reserved_peak_bytes",
                                                 "predicted", false,
                                                 plan.predicted.reserved_peak_bytes));
    if (plan.predicted.reserved_peak_bytes < 0) {
      return json_fields::Error("predicted.reserved_peak_bytes", "must be >= 0");
    }
  }
  const json* blocks = json_fields::Find(doc, "blocks");
  if (blocks == nullptr) return json_fields::Error("blocks", "missing");
  SACPLAN_RETURN_IF_ERROR(json_fields::RequireArray(*blocks, "blocks"));
  for (size_t i = 0; i < blocks->size(); ++i) {
    const std::string path = absl::StrCat("blocks[", i, "]");
    SACPLAN_RETURN_IF_ERROR(json_fields::RequireObject((*blocks)[i], path));
    int64_t index = 0;
    BlockPlan block;
    SACPLAN_RETURN_IF_ERROR(json_fields::ReadInt((*blocks)[i], "index", path, true, index));
    block.index = static_cast<int>(index);
    SACPLAN_RETURN_IF_ERROR(
        json_fields::ReadStrings((*blocks)[i], "save", path, true, block.save));
    plan.blocks.push_back(std::move(block));
  }
  return plan;
}

absl::StatusOr<Plan> ReadPlanFile(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  json doc;
  SACPLAN_RETURN_IF_ERROR(json_fields::Parse(*text, path, doc));
  auto plan = PlanFromJson(doc);
  if (!plan.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", plan.status().message()));
  }
  return plan;
}

json PlanToJson(const Plan& plan, const AnalyzedModel& model) {
  json blocks = json::array();
  for (const BlockPlan& block : plan.blocks) {
    const BlockAnalysis& analysis = model.blocks[block.index];
    const std::set<std::string> saved(block.save.begin(), block.save.end());
    json recompute = json::array();
    for (int k = 0; k < analysis.op_count(); ++k) {
      if (!saved.count(analysis.op_ids[k]) && !analysis.ops[k].collective) {
        recompute.push_back(analysis.op_ids[k]);
      }
    }
    blocks.push_back({{"index", block.index},
                      {"save", block.save},
                      {"recompute", recompute},
                      {"checkpoint", !recompute.empty()}});
  }
  json doc = {{"schema", kPlanSchema},
          {"model", plan.model_name},
          {"method", plan.method},
          {"budget_bytes", plan.budget_bytes},
          {"budget_kind", BudgetKindName(plan.budget_kind)},
          {"semantics", SemanticsName(plan.semantics)},
          {"predicted",
           {{"peak_bytes", plan.predicted.peak_bytes},
            {"step_ms", plan.predicted.step_ms},
            {"recompute_ms", plan.predicted.recompute_ms}}},
          {"blocks", blocks}};
  if (!plan.model_config.empty()) doc["model_config"] = plan.model_config;
  if (plan.predicted.reserved_peak_bytes > 0) {
    doc["predicted"]["reserved_peak_bytes"] = plan.predicted.reserved_peak_bytes;
  }
  return doc;
}

}  // namespace sacplan
