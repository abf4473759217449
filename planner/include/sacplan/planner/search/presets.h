// The fixed checkpointing policies of today's training stacks, expressed as
// save masks so that they can be simulated and compared with optimal plans.
#ifndef SACPLAN_PLANNER_SEARCH_PRESETS_H_
#define SACPLAN_PLANNER_SEARCH_PRESETS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sacplan/planner/memory/simulator.h"

namespace sacplan {

// Names accepted by PresetMasks, for help texts and the compare table:
// none, full, torchtitan, attn_only, megatron, every_nth:N (N >= 1).
std::vector<std::string> PresetNames();

// PresetNames() with every_nth:N made concrete (every_nth:2, every_nth:4):
// the presets that compare tables and the solver measure plans against.
std::vector<std::string> ComparedPresetNames();

// Per-block save masks for a preset. Fails with InvalidArgument for an
// unknown name or a bad every_nth argument.
//  none        save every op: plain autograd, no recompute.
//  full        save nothing but collectives: the block re-runs in backward.
//  torchtitan  TorchTitan's op-level policy: attention outputs, collectives
//              and every other matmul (the 1st, 3rd, ... linear in a block;
//              biased linears count too, as addmm).
//  attn_only   FastVideo: attention outputs and collectives only.
//  megatron    Megatron selective recompute: everything but core attention.
//  every_nth:N full checkpointing on blocks 0, N, 2N, ...; the rest none.
absl::StatusOr<std::vector<SaveMask>> PresetMasks(const AnalyzedModel& model,
                                                  const std::string& name);

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_SEARCH_PRESETS_H_
