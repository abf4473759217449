#include "sacplan/planner/ir/parallel.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "sacplan/status_macros.h"

namespace sacplan {

std::string DescribeRanks(const ParallelConfig& p) {
  if (p.single_rank()) return "";
  std::string how;
  if (p.fsdp) how = "FSDP";
  if (p.sp > 1) absl::StrAppend(&how, how.empty() ? "" : ", ", "sequence parallel ", p.sp);
  if (how.empty()) how = "replicated";
  return absl::StrCat("per rank of ", p.world_size, " (", how, ")");
}

absl::Status ValidateParallelConfig(const ParallelConfig& p, const ParallelFieldNames& names) {
  if (p.world_size < 1 || p.world_size > kMaxWorldSize) {
    return absl::InvalidArgumentError(absl::StrCat(
        names.world_size, ": must be in [1, ", kMaxWorldSize, "], got ", p.world_size));
  }
  if (p.sp < 1 || p.sp > p.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat(names.sp, ": must be in [1, ", names.world_size, " (", p.world_size,
                     ")], got ", p.sp, ": a sequence-parallel group is made of ranks of the job"));
  }
  if (p.world_size % p.sp != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(names.sp, ": must divide ", names.world_size, " (", p.world_size,
                     "), got ", p.sp, ": the job is made of whole sequence-parallel groups"));
  }
  if (p.fsdp && p.world_size < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        names.fsdp, ": needs ", names.world_size,
        " 2 or more (FSDP on one rank has no one to shard with)"));
  }
  return absl::OkStatus();
}

absl::Status ValidateBlockFsdp(const BlockFsdp& f, bool fsdp_on, int block) {
  const std::string path = absl::StrCat("blocks[", block, "].fsdp");
  if (!fsdp_on) {
    if (f.unsharded_param_bytes != 0 || f.sharded_grad_bytes != 0 ||
        f.reduce_scatter_bytes != 0 || f.all_gather_ms != 0 || f.reduce_scatter_ms != 0 ||
        f.all_gather_workspace_bytes != 0 || f.reduce_scatter_workspace_bytes != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": present but parallel.fsdp is false"));
    }
    return absl::OkStatus();
  }
  if (f.unsharded_param_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ".unsharded_param_bytes: must be > 0 under FSDP"));
  }
  if (f.sharded_grad_bytes < 0 || f.reduce_scatter_bytes < 0 ||
      f.all_gather_workspace_bytes < 0 || f.reduce_scatter_workspace_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": byte counts must be >= 0"));
  }
  if (!(f.all_gather_ms >= 0 && f.reduce_scatter_ms >= 0 &&
        std::isfinite(f.all_gather_ms + f.reduce_scatter_ms))) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": times must be finite and >= 0"));
  }
  return absl::OkStatus();
}

}  // namespace sacplan
