// Many GPUs: how a profile's one rank sits among its peers (world size,
// FSDP2, Ulysses sequence parallel) and what FSDP2 adds to each block.
// A profile describes one rank; every byte count and time in it is that
// rank's. Format: docs/profile_format.md#many-gpus; memory and time model:
// docs/many_gpus.md.
#ifndef SACPLAN_PLANNER_IR_PARALLEL_H_
#define SACPLAN_PLANNER_IR_PARALLEL_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace sacplan {

// The largest world size accepted (2^20 ranks): far beyond any cluster, small
// enough that per-rank arithmetic cannot overflow.
inline constexpr int kMaxWorldSize = 1 << 20;

struct ParallelConfig {
  int world_size = 1;  // ranks in the job, >= 1
  // FSDP2 (fully_shard per block): parameters, gradients and optimizer state
  // sharded over all world_size ranks. Needs world_size >= 2.
  bool fsdp = false;
  // Ulysses sequence-parallel degree: groups of sp consecutive ranks split
  // the tokens; 1 <= sp <= world_size and world_size % sp == 0. Data
  // parallel degree is world_size / sp.
  int sp = 1;

  bool single_rank() const { return world_size == 1 && !fsdp && sp == 1; }
};

// What FSDP2 adds to one block, on one rank. All zero without FSDP.
struct BlockFsdp {
  // The block's parameters as all-gathered (in the param dtype FSDP2's
  // MixedPrecisionPolicy names): live from the all-gather before the block's
  // forward until that forward ends (reshard_after_forward), and again from
  // the all-gather before its backward until the backward ends. > 0 under
  // FSDP.
  int64_t unsharded_param_bytes = 0;
  // This rank's gradient shard after the reduce-scatter; lives until the
  // optimizer step.
  int64_t sharded_grad_bytes = 0;
  // The flat reduce-scatter input FSDP2 copies the unsharded gradients into;
  // live during the reduce-scatter.
  int64_t reduce_scatter_bytes = 0;
  double all_gather_ms = 0;      // one all-gather of the block's parameters
  double reduce_scatter_ms = 0;  // one reduce-scatter of its gradients
  // Scratch the collective itself allocates and frees while it runs (gloo
  // on CPU: a buffer the size of the gathered parameters; NCCL: 0).
  int64_t all_gather_workspace_bytes = 0;
  int64_t reduce_scatter_workspace_bytes = 0;
};

// "per rank of 8 (FSDP, sequence parallel 8)"; "" for a single rank. The
// words plan, compare, frontier and report print beside their figures.
std::string DescribeRanks(const ParallelConfig& parallel);

// What the errors below call the three settings: the profile's fields, or
// a command line's flags ({"--world-size", "--sp", "--fsdp"}); static strings.
struct ParallelFieldNames {
  const char* world_size = "parallel.world_size";
  const char* sp = "parallel.sp";
  const char* fsdp = "parallel.fsdp";
};

// The rules on the fields, as InvalidArgument naming the field:
// "parallel.sp: must be in [1, parallel.world_size (8)], got 16".
absl::Status ValidateParallelConfig(const ParallelConfig& parallel,
                                    const ParallelFieldNames& names = {});

// Block `block`'s FSDP fields against the job: under FSDP
// unsharded_param_bytes > 0, without it every field zero; bytes >= 0, times
// finite and >= 0. InvalidArgument naming the field:
// "blocks[3].fsdp.unsharded_param_bytes: must be > 0 under FSDP".
absl::Status ValidateBlockFsdp(const BlockFsdp& fsdp, bool fsdp_on, int block);

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_IR_PARALLEL_H_
