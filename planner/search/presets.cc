#include "sacplan/planner/search/presets.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "sacplan/planner/ir/op_kinds.h"
#include "sacplan/planner/memory/schedule.h"

namespace sacplan {
namespace {

SaveMask BlockMask(const Block& block, const std::string& name) {
  SaveMask mask(block.ops.size(), false);
  int matmuls_seen = 0;
  for (size_t k = 0; k < block.ops.size(); ++k) {
    const std::string& kind = block.ops[k].kind;
    const OpClass op_class = KindInfo(kind).op_class;
    const bool attention = op_class == OpClass::kAttention;
    if (name == "none") {
      mask[k] = true;
    } else if (name == "attn_only") {
      mask[k] = attention;
    } else if (name == "megatron") {
      mask[k] = !attention;
    } else if (name == "torchtitan") {
      // TorchTitan counts matmuls per checkpointed region and saves the
      // odd-numbered ones (1st, 3rd, ...).
      if (op_class == OpClass::kGemm) mask[k] = (++matmuls_seen % 2) == 1;
      if (attention) mask[k] = true;
    }
    // "full": nothing but collectives, which LowerBlock always keeps.
    if (name != "none" && block.ops[k].never_save) mask[k] = false;
  }
  return mask;
}

// A preset may save a random op before one it recomputes (megatron saves
// torch.rand but never a dropout's never_save buffer): such blocks recompute
// the earlier random ops too (ReplayRandomOps), under either semantics.
std::vector<SaveMask> ReplayRandomOpsOfEach(const AnalyzedModel& model,
                                            std::vector<SaveMask> masks) {
  for (size_t b = 0; b < masks.size(); ++b) {
    masks[b] = ReplayRandomOps(model.blocks[b], std::move(masks[b]));
  }
  return masks;
}

}  // namespace

std::vector<std::string> PresetNames() {
  return {"none", "full", "torchtitan", "attn_only", "megatron", "every_nth:N"};
}

std::vector<std::string> ComparedPresetNames() {
  std::vector<std::string> names;
  for (const std::string& name : PresetNames()) {
    if (absl::StartsWith(name, "every_nth:")) {
      names.push_back("every_nth:2");
      names.push_back("every_nth:4");
    } else {
      names.push_back(name);
    }
  }
  return names;
}

absl::StatusOr<std::vector<SaveMask>> PresetMasks(const AnalyzedModel& model,
                                                  const std::string& name) {
  std::vector<SaveMask> masks;
  const std::vector<Block>& blocks = model.model->blocks;
  if (absl::StartsWith(name, "every_nth:")) {
    int every = 0;
    if (!absl::SimpleAtoi(name.substr(10), &every) || every < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "preset '", name, "': N in every_nth:N must be an integer >= 1"));
    }
    for (size_t b = 0; b < blocks.size(); ++b) {
      masks.push_back(BlockMask(blocks[b], b % every == 0 ? "full" : "none"));
    }
    return ReplayRandomOpsOfEach(model, std::move(masks));
  }
  for (const char* known : {"none", "full", "torchtitan", "attn_only",
                                     "megatron"}) {
    if (name != known) continue;
    for (const Block& block : blocks) masks.push_back(BlockMask(block, name));
    return ReplayRandomOpsOfEach(model, std::move(masks));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown preset '", name,
      "' (known: none, full, torchtitan, attn_only, megatron, every_nth:N)"));
}

}  // namespace sacplan
