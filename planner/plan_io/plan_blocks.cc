// A plan's blocks beside their save sets: reading them, the checkpoint
// flag's one meaning, random replay and the copy triggers a trainer acts at
// (docs/plan_format.md).
#include "plan_io/plan_blocks.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "sacplan/planner/plan_io/json_reader.h"
#include "sacplan/status_macros.h"

namespace sacplan {

using json_reader::json;

namespace {

constexpr const char* kFlagMeaning =
    "checkpoint is true exactly when a block recomputes an op (docs/plan_format.md)";

absl::Status ReadBlock(const json& doc, const std::string& path, const std::string& schema,
                       BlockPlan& block) {
  RETURN_IF_ERROR(json_reader::RequireObject(doc, path));
  RETURN_IF_ERROR(json_reader::ReadInt32(doc, "index", path, true, block.index,
                                         json_reader::kIndexRange));
  RETURN_IF_ERROR(json_reader::ReadStrings(doc, "save", path, true, block.save));
  RETURN_IF_ERROR(json_reader::ReadStrings(doc, "offload", path, false, block.offload));
  RETURN_IF_ERROR(
      json_reader::ReadString(doc, "spill_trigger", path, false, block.spill_trigger));
  RETURN_IF_ERROR(json_reader::ReadString(doc, "lead_trigger", path, false, block.lead_trigger));
  RETURN_IF_ERROR(json_reader::ReadBool(doc, "lead", path, false, block.lead));
  if (json_reader::Find(doc, "recompute") != nullptr) {
    RETURN_IF_ERROR(
        json_reader::ReadStrings(doc, "recompute", path, true, block.recompute.emplace()));
  }
  if (json_reader::Find(doc, "checkpoint") != nullptr) {
    RETURN_IF_ERROR(json_reader::ReadBool(doc, "checkpoint", path, true, block.checkpoint.emplace()));
  }
  if (!block.offload.empty() && schema == kPlanSchema) {
    return json_reader::Error(path + ".offload",
                              absl::StrCat("needs schema \"", kPlanSchemaOffload,
                                           "\" (a plan/1 reader would ignore it)"));
  }
  if (!block.recompute.has_value()) return absl::OkStatus();
  const std::set<std::string> saved(block.save.begin(), block.save.end());
  for (const std::string& id : *block.recompute) {
    if (saved.count(id) > 0) {
      return json_reader::Error(path + ".recompute",
                                absl::StrCat("names '", id, "', which the block saves"));
    }
  }
  if (block.checkpoint.has_value() && *block.checkpoint == block.recompute->empty()) {
    return json_reader::Error(
        path + ".checkpoint",
        *block.checkpoint
            ? absl::StrCat("true, but the block's recompute list is empty; ", kFlagMeaning)
            : absl::StrCat("false, but the block's recompute list names '",
                           block.recompute->front(), "'; ", kFlagMeaning));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadPlanBlocks(const json& doc, const std::string& schema,
                            std::vector<BlockPlan>& blocks) {
  const json* list = json_reader::Find(doc, "blocks");
  if (list == nullptr) return json_reader::Error("blocks", "missing");
  RETURN_IF_ERROR(json_reader::RequireArray(*list, "blocks"));
  if (list->empty()) return json_reader::Error("blocks", "empty: a plan has one entry per block");
  std::vector<bool> seen(list->size(), false);
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string path = absl::StrCat("blocks[", i, "]");
    BlockPlan block;
    RETURN_IF_ERROR(ReadBlock((*list)[i], path, schema, block));
    // Blocks may come in any order, each index once.
    if (static_cast<size_t>(block.index) >= list->size() || seen[block.index]) {
      return json_reader::Error(path + ".index",
                                absl::StrCat(block.index, " is out of range or repeated (the plan "
                                             "has ", list->size(), " blocks)"));
    }
    seen[block.index] = true;
    blocks.push_back(std::move(block));
  }
  return absl::OkStatus();
}

bool StatedCheckpoint(const BlockPlan& block) {
  if (block.recompute.has_value()) return !block.recompute->empty();
  return block.checkpoint.value_or(true);
}

absl::Status CheckStatedRecompute(const BlockAnalysis& analysis, const SaveMask& saved,
                                  const BlockPlan& block) {
  const std::vector<int> recomputed = UnsavedOps(analysis, saved);
  const std::string name = absl::StrCat("plan block ", block.index);
  if (block.checkpoint.has_value() && *block.checkpoint == recomputed.empty()) {
    return absl::InvalidArgumentError(
        *block.checkpoint
            ? absl::StrCat(name, " has checkpoint true, but saves every op (collectives "
                           "aside); ", kFlagMeaning)
            : absl::StrCat(name, " has checkpoint false, but recomputes op '",
                           analysis.op_ids[recomputed.front()], "', which it does not save; ",
                           kFlagMeaning));
  }
  if (!block.recompute.has_value()) return absl::OkStatus();
  const std::set<std::string> stated(block.recompute->begin(), block.recompute->end());
  for (const std::string& id : stated) {
    const int op = analysis.FindOp(id);
    if (op < 0 || analysis.ops[op].collective) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, "'s recompute list names '", id, "', which ",
          op < 0 ? "the model's block does not have" : "is a collective (always saved)"));
    }
  }
  for (int k : recomputed) {
    if (stated.count(analysis.op_ids[k]) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, " recomputes op '", analysis.op_ids[k],
          "', which it does not save, but its recompute list leaves it out"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckRandomReplay(const BlockAnalysis& block, const SaveMask& saved, int index) {
  const int misreplayed = FirstMisreplayedRandomOp(block, saved);
  if (misreplayed < 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "plan block ", index, " recomputes random op '", block.op_ids[misreplayed],
      "' after saving an earlier one: the re-run would draw other random numbers than the "
      "forward (save every random op from the first saved one on, or none)"));
}

std::vector<ActedTriggers> TriggersActedAt(const Plan& plan) {
  std::vector<const BlockPlan*> by_index(plan.blocks.size());
  for (const BlockPlan& block : plan.blocks) by_index[block.index] = &block;
  std::vector<ActedTriggers> acted(by_index.size());
  for (size_t i = 0; i < by_index.size(); ++i) {
    const BlockPlan* before = i > 0 ? by_index[i - 1] : nullptr;
    // A block's copy windows (WindowsOf) end at triggers of its own and of
    // the block after: a block acts at them for its copies and its
    // neighbour's.
    if (by_index[i]->offload.empty() && (before == nullptr || before->offload.empty())) continue;
    acted[i] = {by_index[i]->spill_trigger, by_index[i]->lead_trigger,
                before != nullptr && before->lead};
  }
  return acted;
}

}  // namespace sacplan
