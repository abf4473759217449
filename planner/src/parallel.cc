#include "sacplan/planner/parallel.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "parallel_json.h"
#include "sacplan/planner/json_reader.h"
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

namespace sacplan {

using json_reader::json;

absl::Status ReadParallel(const json& doc, ParallelConfig& out) {
  out = ParallelConfig{};
  const json* p = json_reader::Find(doc, "parallel");
  if (p == nullptr) return absl::OkStatus();
  const std::string path = "parallel";
  RETURN_IF_ERROR(json_reader::RequireObject(*p, path));
  const json_reader::IntRange ranks{1, kMaxWorldSize};
  RETURN_IF_ERROR(json_reader::ReadInt32(*p, "world_size", path, true, out.world_size, ranks));
  RETURN_IF_ERROR(json_reader::ReadBool(*p, "fsdp", path, false, out.fsdp));
  RETURN_IF_ERROR(json_reader::ReadInt32(*p, "sp", path, false, out.sp, ranks));
  return ValidateParallelConfig(out);
}

absl::Status ReadBlockFsdp(const json& block, const std::string& path, bool fsdp_on,
                           BlockFsdp& out) {
  const std::string fpath = path + ".fsdp";
  const json* f = json_reader::Find(block, "fsdp");
  if (f == nullptr) {
    return fsdp_on ? json_reader::Error(fpath, "missing (parallel.fsdp is true)")
                   : absl::OkStatus();
  }
  if (!fsdp_on) return json_reader::Error(fpath, "present but parallel.fsdp is false");
  RETURN_IF_ERROR(json_reader::RequireObject(*f, fpath));
  RETURN_IF_ERROR(json_reader::ReadInt(*f, "unsharded_param_bytes", fpath, true,
                                       out.unsharded_param_bytes,
                                       {1, json_reader::kMaxBytes}));
  RETURN_IF_ERROR(json_reader::ReadInt(*f, "sharded_grad_bytes", fpath, true,
                                       out.sharded_grad_bytes, json_reader::kByteRange));
  RETURN_IF_ERROR(json_reader::ReadInt(*f, "reduce_scatter_bytes", fpath, true,
                                       out.reduce_scatter_bytes, json_reader::kByteRange));
  RETURN_IF_ERROR(json_reader::ReadInt(*f, "all_gather_workspace_bytes", fpath, false,
                                       out.all_gather_workspace_bytes,
                                       json_reader::kByteRange));
  RETURN_IF_ERROR(json_reader::ReadInt(*f, "reduce_scatter_workspace_bytes", fpath, false,
                                       out.reduce_scatter_workspace_bytes,
                                       json_reader::kByteRange));
  RETURN_IF_ERROR(json_reader::ReadNumber(*f, "all_gather_ms", fpath, true,
                                          out.all_gather_ms, json_reader::kTimeRange));
  RETURN_IF_ERROR(json_reader::ReadNumber(*f, "reduce_scatter_ms", fpath, true,
                                          out.reduce_scatter_ms, json_reader::kTimeRange));
  return absl::OkStatus();
}

json ParallelToJson(const ParallelConfig& p) {
  return {{"world_size", p.world_size}, {"fsdp", p.fsdp}, {"sp", p.sp}};
}

json BlockFsdpToJson(const BlockFsdp& f) {
  return {{"unsharded_param_bytes", f.unsharded_param_bytes},
          {"sharded_grad_bytes", f.sharded_grad_bytes},
          {"reduce_scatter_bytes", f.reduce_scatter_bytes},
          {"all_gather_workspace_bytes", f.all_gather_workspace_bytes},
          {"reduce_scatter_workspace_bytes", f.reduce_scatter_workspace_bytes},
          {"all_gather_ms", f.all_gather_ms},
          {"reduce_scatter_ms", f.reduce_scatter_ms}};
}

}  // namespace sacplan
