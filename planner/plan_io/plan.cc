#include "sacplan/planner/plan_io/plan.h"

#include <set>
#include <string_view>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "plan_io/plan_blocks.h"
#include "sacplan/planner/memory/schedule.h"
#include "sacplan/planner/plan_io/json_reader.h"
#include "sacplan/status_macros.h"

namespace sacplan {

using json_reader::json;

std::vector<BlockPlan> BlockPlansFromMasks(const AnalyzedModel& model,
                                           const std::vector<SaveMask>& masks,
                                           const std::vector<OffloadMask>& offloaded,
                                           Semantics semantics) {
  std::vector<BlockPlan> blocks;
  for (size_t b = 0; b < masks.size(); ++b) {
    const BlockAnalysis& analysis = model.blocks[b];
    BlockPlan block;
    block.index = static_cast<int>(b);
    for (size_t k = 0; k < masks[b].size(); ++k) {
      if (masks[b][k]) block.save.push_back(analysis.op_ids[k]);
    }
    if (b < offloaded.size() && !offloaded[b].empty()) {
      // Carried inputs come first among the tensors, then op outputs in op
      // order: one entry per input, one per op however many outputs move.
      int last_op = -1;
      for (size_t t = 0; t < offloaded[b].size(); ++t) {
        if (!offloaded[b][t]) continue;
        const TensorNode& node = analysis.tensors[t];
        if (node.carried_input) {
          block.offload.push_back(node.id);
        } else if (node.producer >= 0 && node.producer != last_op) {
          block.offload.push_back(analysis.op_ids[node.producer]);
          last_op = node.producer;
        }
      }
    }
    blocks.push_back(std::move(block));
  }
  // Where the copies reach into the blocks around them.
  if (std::none_of(blocks.begin(), blocks.end(),
                   [](const BlockPlan& block) { return !block.offload.empty(); })) {
    return blocks;
  }
  const std::vector<BlockSchedule> schedules = LowerStep(model, masks, offloaded, semantics);
  for (size_t b = 0; b < blocks.size(); ++b) {
    const BlockAnalysis& analysis = model.blocks[b];
    const BlockTriggers triggers = TriggersOf(analysis);
    auto id = [&](int op) { return op >= 0 ? analysis.op_ids[op] : std::string(); };
    blocks[b].spill_trigger = id(triggers.spill_op);
    blocks[b].lead_trigger = id(triggers.lead_op);
    blocks[b].lead = schedules[b].offload.lead_trigger_op >= 0;
  }
  return blocks;
}

bool PlanOffloads(const Plan& plan) {
  for (const BlockPlan& block : plan.blocks) {
    if (!block.offload.empty()) return true;
  }
  return false;
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
    if (plan.semantics == Semantics::kTorchSac) {
      RETURN_IF_ERROR(CheckRandomReplay(analysis, mask, block.index));
    }
    RETURN_IF_ERROR(CheckStatedRecompute(analysis, mask, block));
  }
  return masks;
}

namespace {

// Why block `analysis` cannot offload op `k` under `saved`, or "".
std::string OffloadRefusal(const BlockAnalysis& analysis, const SaveMask& saved, int k) {
  const OpNode& op = analysis.ops[k];
  if (op.collective) return "a collective: its output stays on the device";
  if (op.autocast_cached) {
    return "an autocast-cached weight cast: autocast's cache holds it on the device anyway";
  }
  for (int out : op.outputs) {
    if (analysis.tensors[out].block_output) {
      return "the block output's producer: the next block keeps that tensor";
    }
  }
  if (!saved[k]) return "not saved: only what the plan keeps can be offloaded";
  return "";
}

}  // namespace

absl::StatusOr<std::vector<OffloadMask>> OffloadMasksFromPlan(
    const AnalyzedModel& model, const Plan& plan, const std::vector<SaveMask>& masks) {
  if (!PlanOffloads(plan)) return std::vector<OffloadMask>();
  if (!model.model->host_link.available()) return HostLinkMissing();
  std::vector<OffloadMask> offloaded(model.blocks.size());
  for (const BlockPlan& block : plan.blocks) {
    // MasksFromPlan has checked the index.
    const BlockAnalysis& analysis = model.blocks[block.index];
    OffloadMask& mask = offloaded[block.index];
    mask.assign(analysis.tensors.size(), false);
    for (const std::string& id : block.offload) {
      const int op = analysis.FindOp(id);
      if (op >= 0) {
        const std::string refusal = OffloadRefusal(analysis, masks[block.index], op);
        if (!refusal.empty()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "plan block ", block.index, " offloads op '", id, "', which is ", refusal));
        }
        for (int out : analysis.ops[op].outputs) mask[out] = true;
        continue;
      }
      bool input = false;
      for (int t : analysis.carried_inputs) {
        if (analysis.tensors[t].id == id) mask[t] = input = true;
      }
      if (!input) {
        return absl::InvalidArgumentError(absl::StrCat(
            "plan block ", block.index, " offloads '", id,
            "', which is neither an op nor a carried input of the model's block"));
      }
    }
  }
  RETURN_IF_ERROR(CopyReplayOfPlan(model, plan).status());
  return offloaded;
}

absl::StatusOr<CopyReplay> CopyReplayOfPlan(const AnalyzedModel& model, const Plan& plan) {
  CopyReplay replay;
  if (!PlanOffloads(plan)) return replay;
  const bool recorded = std::any_of(plan.blocks.begin(), plan.blocks.end(),
                                    [](const BlockPlan& block) {
                                      return !block.spill_trigger.empty() ||
                                             !block.lead_trigger.empty() || block.lead;
                                    });
  replay.triggers.resize(model.blocks.size());
  replay.leads.assign(model.blocks.size(), Lead::kNone);
  // Without triggers (a plan written before them, or by hand), copies keep
  // to their own block, as sacplan_torch then runs them.
  if (!recorded) return replay;
  for (const BlockPlan& block : plan.blocks) {
    // MasksFromPlan has checked the index.
    const BlockAnalysis& analysis = model.blocks[block.index];
    const BlockTriggers by_times = TriggersOf(analysis);
    BlockTriggers& triggers = replay.triggers[block.index];
    for (auto [field, id, op, timed] :
         {std::tuple<const char*, const std::string*, int*, int>{
              "spill_trigger", &block.spill_trigger, &triggers.spill_op, by_times.spill_op},
          {"lead_trigger", &block.lead_trigger, &triggers.lead_op, by_times.lead_op}}) {
      if (id->empty() && timed >= 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "plan block ", block.index, " has no ", field,
            ", which a plan that offloads records on every block that has one ('",
            analysis.op_ids[timed], "' by the profile's times)"));
      }
      if (id->empty()) continue;
      *op = analysis.FindOp(*id);
      if (*op < 0) {
        return absl::InvalidArgumentError(absl::StrCat("plan block ", block.index, "'s ", field,
                                                       " '", *id,
                                                       "' is not an op of the model's block"));
      }
    }
    if (block.lead) replay.leads[block.index] = Lead::kRecorded;
  }
  return replay;
}

std::string GraphFingerprint(const Model& model) {
  uint64_t hash = 0xcbf29ce484222325ULL;  // FNV-1a 64-bit offset basis
  auto mix = [&hash](std::string_view text) {
    for (const char c : text) {
      hash ^= static_cast<unsigned char>(c);
      hash *= 0x100000001b3ULL;  // FNV prime
    }
    // A separator that no id contains, so that ("ab", "c") != ("a", "bc").
    hash ^= 0xff;
    hash *= 0x100000001b3ULL;
  };
  mix(std::to_string(model.blocks.size()));
  for (const Block& block : model.blocks) {
    mix("block");
    for (const BlockInput& in : block.inputs) mix(in.tensor.id);
    for (const Op& op : block.ops) {
      mix("op");
      for (const std::string_view token : OpIdentity(op)) mix(token);
    }
    // One output: the fingerprint single-stream graphs always had. Several:
    // each stream's output in order, and which inputs are carried.
    for (const std::string& out : block.outputs) mix(out);
    if (block.outputs.size() > 1) {
      mix("streams");
      for (const BlockInput& in : block.inputs) {
        if (in.kind == InputKind::kCarried) mix(in.tensor.id);
      }
    }
  }
  return absl::StrFormat("%016x", hash);
}

absl::Status CheckModelConfigMatches(const Plan& plan, const json& model_config,
                                     absl::string_view whose) {
  if (!plan.model_config.is_object() || !model_config.is_object()) return absl::OkStatus();
  for (const auto& [key, value] : plan.model_config.items()) {
    const json* other = json_reader::Find(model_config, key);
    if (other != nullptr && *other != value) {
      return absl::InvalidArgumentError(absl::StrCat("plan is for another model: model_config.",
                                                     key, " is ", value.dump(), " in the plan, ",
                                                     other->dump(), " in ", whose));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckPlanMatches(const Plan& plan, const Profile& profile) {
  if (plan.model_name != profile.model_name) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan is for model '", plan.model_name, "', the profile is for '",
                     profile.model_name, "'"));
  }
  RETURN_IF_ERROR(CheckModelConfigMatches(plan, profile.model_config, "the profile"));
  if (!plan.graph_fingerprint.empty()) {
    const std::string actual = GraphFingerprint(profile.model);
    if (plan.graph_fingerprint != actual) {
      return absl::InvalidArgumentError(absl::StrCat(
          "plan is for another op graph: graph_fingerprint ", plan.graph_fingerprint,
          " in the plan, ", actual, " for the profile (blocks, op ids or "
          "connections differ)"));
    }
  }
  return absl::OkStatus();
}

void SetPrediction(const StepResult& result, Plan& plan) {
  plan.predicted = {.peak_bytes = result.peak_bytes, .step_ms = result.step_ms,
                    .recompute_ms = result.recompute_ms, .exposed_copy_ms = result.exposed_copy_ms,
                    .offloaded_bytes = result.offloaded_bytes,
                    .host_peak_bytes = result.host_peak_bytes, .host_ms = result.host_ms,
                    .host_wait_ms = result.host_wait_ms};
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
  RETURN_IF_ERROR(json_reader::RequireObject(doc, "plan"));
  std::string schema;
  RETURN_IF_ERROR(json_reader::ReadString(doc, "schema", "", true, schema));
  if (schema != kPlanSchema && schema != kPlanSchemaOffload) {
    return json_reader::Error("schema", absl::StrCat("expected \"", kPlanSchema, "\" or \"",
                                                     kPlanSchemaOffload, "\", got \"", schema,
                                                     "\""));
  }
  Plan plan;
  RETURN_IF_ERROR(
      json_reader::ReadString(doc, "model", "", false, plan.model_name));
  RETURN_IF_ERROR(json_reader::ReadString(doc, "method", "", false, plan.method));
  RETURN_IF_ERROR(json_reader::ReadString(doc, "graph_fingerprint", "", false,
                                                  plan.graph_fingerprint));
  if (const json* config = json_reader::Find(doc, "model_config")) {
    RETURN_IF_ERROR(json_reader::RequireObject(*config, "model_config"));
    plan.model_config = *config;
  }
  RETURN_IF_ERROR(
      json_reader::ReadInt(doc, "budget_bytes", "", false, plan.budget_bytes,
                           json_reader::kByteRange));
  std::string budget_kind = "allocated";
  RETURN_IF_ERROR(
      json_reader::ReadString(doc, "budget_kind", "", false, budget_kind));
  auto kind = ParseBudgetKind(budget_kind);
  if (!kind.ok()) return json_reader::Error("budget_kind", std::string(kind.status().message()));
  plan.budget_kind = *kind;
  std::string semantics = "sacplan";
  RETURN_IF_ERROR(
      json_reader::ReadString(doc, "semantics", "", false, semantics));
  auto parsed = ParseSemantics(semantics);
  if (!parsed.ok()) return json_reader::Error("semantics", std::string(parsed.status().message()));
  plan.semantics = *parsed;
  if (const json* predicted = json_reader::Find(doc, "predicted")) {
    RETURN_IF_ERROR(json_reader::RequireObject(*predicted, "predicted"));
    RETURN_IF_ERROR(
        json_reader::ReadInt(*predicted, "peak_bytes", "predicted", false,
                             plan.predicted.peak_bytes, json_reader::kByteRange));
    RETURN_IF_ERROR(
        json_reader::ReadNumber(*predicted, "step_ms", "predicted", false,
                                plan.predicted.step_ms, json_reader::kTimeRange));
    RETURN_IF_ERROR(
        json_reader::ReadNumber(*predicted, "recompute_ms", "predicted", false,
                                plan.predicted.recompute_ms, json_reader::kTimeRange));
    RETURN_IF_ERROR(
        json_reader::ReadInt(*predicted, "reserved_peak_bytes", "predicted", false,
                             plan.predicted.reserved_peak_bytes, json_reader::kByteRange));
    RETURN_IF_ERROR(
        json_reader::ReadNumber(*predicted, "exposed_copy_ms", "predicted", false,
                                plan.predicted.exposed_copy_ms, json_reader::kTimeRange));
    RETURN_IF_ERROR(
        json_reader::ReadInt(*predicted, "offloaded_bytes", "predicted", false,
                             plan.predicted.offloaded_bytes, json_reader::kByteRange));
    RETURN_IF_ERROR(
        json_reader::ReadInt(*predicted, "host_peak_bytes", "predicted", false,
                             plan.predicted.host_peak_bytes, json_reader::kByteRange));
    for (auto [key, out] : {std::pair{"host_ms", &plan.predicted.host_ms},
                            std::pair{"host_wait_ms", &plan.predicted.host_wait_ms}}) {
      RETURN_IF_ERROR(json_reader::ReadNumber(*predicted, key, "predicted", false, *out,
                                              json_reader::kTimeRange));
    }
  }
  RETURN_IF_ERROR(ReadPlanBlocks(doc, schema, plan.blocks));
  return plan;
}

absl::StatusOr<Plan> ReadPlanFile(const std::string& path) {
  ASSIGN_OR_RETURN(const json doc, json_reader::ReadJsonFile(path));
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
    SaveMask saved(analysis.ops.size(), false);
    for (const std::string& id : block.save) {
      if (const int k = analysis.FindOp(id); k >= 0) saved[k] = true;
    }
    json recompute = json::array();
    for (int k : UnsavedOps(analysis, saved)) recompute.push_back(analysis.op_ids[k]);
    blocks.push_back({{"index", block.index},
                      {"save", block.save},
                      {"recompute", recompute},
                      {"checkpoint", !recompute.empty()}});
    if (!block.offload.empty()) blocks.back()["offload"] = block.offload;
    if (!block.spill_trigger.empty()) blocks.back()["spill_trigger"] = block.spill_trigger;
    if (!block.lead_trigger.empty()) blocks.back()["lead_trigger"] = block.lead_trigger;
    if (block.lead) blocks.back()["lead"] = true;
  }
  const bool offloads = PlanOffloads(plan);
  json doc = {{"schema", offloads ? kPlanSchemaOffload : kPlanSchema},
          {"model", plan.model_name},
          {"method", plan.method},
          {"graph_fingerprint", GraphFingerprint(*model.model)},
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
  if (offloads) {
    doc["predicted"]["exposed_copy_ms"] = plan.predicted.exposed_copy_ms;
    doc["predicted"]["offloaded_bytes"] = plan.predicted.offloaded_bytes;
    doc["predicted"]["host_peak_bytes"] = plan.predicted.host_peak_bytes;
  }
  if (plan.predicted.host_ms > 0) {  // a profile with host times
    doc["predicted"]["host_ms"] = plan.predicted.host_ms;
    doc["predicted"]["host_wait_ms"] = plan.predicted.host_wait_ms;
  }
  return doc;
}

}  // namespace sacplan
