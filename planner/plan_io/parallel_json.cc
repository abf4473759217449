#include "plan_io/parallel_json.h"

#include "sacplan/planner/plan_io/json_reader.h"
#include "sacplan/status_macros.h"

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
