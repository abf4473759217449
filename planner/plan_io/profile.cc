#include "sacplan/planner/plan_io/profile.h"

#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "plan_io/host_times_json.h"
#include "plan_io/parallel_json.h"
#include "sacplan/planner/plan_io/json_reader.h"
#include "sacplan/status_macros.h"

namespace sacplan {
namespace {

using json_reader::json;
using json_reader::kByteRange;
using json_reader::kIndexRange;
using json_reader::kNonNegative;
using json_reader::kTimeRange;
using json_reader::ReadBool;
using json_reader::ReadInt;
using json_reader::ReadInts;
using json_reader::ReadNumber;
using json_reader::ReadString;
using json_reader::ReadStrings;

// GB/s of a host link: 0 (none) up to far beyond any bus.
constexpr json_reader::NumberRange kBandwidthRange{0, 1e6};

absl::Status ReadTensor(const json& j, const std::string& path, TensorInfo& t) {
  RETURN_IF_ERROR(json_reader::RequireObject(j, path));
  RETURN_IF_ERROR(ReadString(j, "id", path, true, t.id));
  RETURN_IF_ERROR(ReadInt(j, "bytes", path, true, t.bytes,
                                  {1, json_reader::kMaxBytes}));
  RETURN_IF_ERROR(ReadInts(j, "shape", path, false, t.shape,
                                   {0, std::numeric_limits<int64_t>::max()}));
  RETURN_IF_ERROR(ReadString(j, "dtype", path, false, t.dtype));
  RETURN_IF_ERROR(ReadBool(j, "requires_grad", path, false, t.requires_grad));
  RETURN_IF_ERROR(ReadString(j, "held_until", path, false, t.held_until));
  return absl::OkStatus();
}

json TensorToJson(const TensorInfo& t) {
  json doc = {{"id", t.id}, {"shape", t.shape}, {"dtype", t.dtype},
              {"bytes", t.bytes}, {"requires_grad", t.requires_grad}};
  if (!t.held_until.empty()) doc["held_until"] = t.held_until;
  return doc;
}

absl::Status ReadOp(const json& j, const std::string& path, Op& op) {
  RETURN_IF_ERROR(json_reader::RequireObject(j, path));
  RETURN_IF_ERROR(ReadString(j, "id", path, true, op.id));
  RETURN_IF_ERROR(ReadString(j, "kind", path, true, op.kind));
  RETURN_IF_ERROR(ReadBool(j, "has_bias", path, false, op.has_bias));
  RETURN_IF_ERROR(ReadStrings(j, "inputs", path, true, op.inputs));
  RETURN_IF_ERROR(
      ReadStrings(j, "backward_needs", path, true, op.backward_needs));
  const json* outputs = json_reader::Find(j, "outputs");
  if (outputs == nullptr) return json_reader::Error(path + ".outputs", "missing");
  RETURN_IF_ERROR(json_reader::RequireArray(*outputs, path + ".outputs"));
  for (size_t i = 0; i < outputs->size(); ++i) {
    TensorInfo t;
    RETURN_IF_ERROR(
        ReadTensor((*outputs)[i], absl::StrCat(path, ".outputs[", i, "]"), t));
    op.outputs.push_back(std::move(t));
  }
  RETURN_IF_ERROR(
      ReadNumber(j, "flops", path, false, op.flops, kNonNegative));
  RETURN_IF_ERROR(
      ReadNumber(j, "bytes_moved", path, false, op.bytes_moved, kNonNegative));
  RETURN_IF_ERROR(ReadNumber(j, "fwd_ms", path, true, op.fwd_ms, kTimeRange));
  RETURN_IF_ERROR(ReadNumber(j, "bwd_ms", path, true, op.bwd_ms, kTimeRange));
  for (auto [key, field] : {std::pair{"checkpointed_fwd_ms", &op.checkpointed_fwd_ms},
                            std::pair{"saved_fwd_ms", &op.saved_fwd_ms},
                            std::pair{"checkpointed_bwd_ms", &op.checkpointed_bwd_ms},
                            std::pair{"recompute_ms", &op.recompute_ms},
                            std::pair{"replay_ms", &op.replay_ms}}) {
    if (json_reader::Find(j, key) == nullptr) continue;
    double ms = 0;
    RETURN_IF_ERROR(ReadNumber(j, key, path, true, ms, kTimeRange));
    *field = ms;
  }
  RETURN_IF_ERROR(ReadInt(j, "workspace_bytes", path, false,
                                  op.workspace_bytes, kByteRange));
  RETURN_IF_ERROR(ReadInt(j, "bwd_workspace_bytes", path, false,
                                  op.bwd_workspace_bytes, kByteRange));
  RETURN_IF_ERROR(
      ReadInt(j, "param_bytes", path, false, op.param_bytes, kByteRange));
  RETURN_IF_ERROR(ReadBool(j, "collective", path, false, op.collective));
  RETURN_IF_ERROR(ReadBool(j, "never_save", path, false, op.never_save));
  RETURN_IF_ERROR(ReadBool(j, "random", path, false, op.random));
  RETURN_IF_ERROR(ReadBool(j, "autocast_cached", path, false, op.autocast_cached));
  RETURN_IF_ERROR(ReadOpHostTimes(j, path, op));
  if (const json* grads = json_reader::Find(j, "input_grad_bytes"); grads != nullptr) {
    const std::string gpath = path + ".input_grad_bytes";
    RETURN_IF_ERROR(json_reader::RequireObject(*grads, gpath));
    for (const auto& [input, value] : grads->items()) {
      RETURN_IF_ERROR(ReadInt(*grads, input, gpath, true,
                                      op.input_grad_bytes[input], kByteRange));
    }
  }
  return absl::OkStatus();
}

json OpToJson(const Op& op) {
  json outputs = json::array();
  for (const TensorInfo& t : op.outputs) outputs.push_back(TensorToJson(t));
  json doc = {{"id", op.id},
              {"kind", op.kind},
              {"has_bias", op.has_bias},
              {"inputs", op.inputs},
              {"outputs", outputs},
              {"backward_needs", op.backward_needs},
              {"flops", op.flops},
              {"bytes_moved", op.bytes_moved},
              {"fwd_ms", op.fwd_ms},
              {"bwd_ms", op.bwd_ms},
              {"workspace_bytes", op.workspace_bytes},
              {"bwd_workspace_bytes", op.bwd_workspace_bytes},
              {"param_bytes", op.param_bytes},
              {"collective", op.collective},
              {"never_save", op.never_save}};
  if (op.random) doc["random"] = true;
  if (op.checkpointed_fwd_ms) doc["checkpointed_fwd_ms"] = *op.checkpointed_fwd_ms;
  if (op.saved_fwd_ms) doc["saved_fwd_ms"] = *op.saved_fwd_ms;
  if (op.checkpointed_bwd_ms) doc["checkpointed_bwd_ms"] = *op.checkpointed_bwd_ms;
  if (op.recompute_ms) doc["recompute_ms"] = *op.recompute_ms;
  if (op.replay_ms) doc["replay_ms"] = *op.replay_ms;
  if (op.autocast_cached) doc["autocast_cached"] = true;
  if (!op.input_grad_bytes.empty()) doc["input_grad_bytes"] = op.input_grad_bytes;
  OpHostTimesToJson(op, doc);
  return doc;
}

// "output": "id" (one stream, as profiles always had) or "outputs": [...]
// (one id per stream), never both.
absl::Status ReadBlockOutputs(const json& j, const std::string& path, Block& block) {
  const bool one = json_reader::Find(j, "output") != nullptr;
  if (one && json_reader::Find(j, "outputs") != nullptr) {
    return json_reader::Error(path + ".outputs",
                              "give \"output\" (one stream) or \"outputs\", not both");
  }
  if (!one && json_reader::Find(j, "outputs") != nullptr) {
    return ReadStrings(j, "outputs", path, true, block.outputs);
  }
  block.outputs.emplace_back();
  return ReadString(j, "output", path, true, block.outputs.back());
}

absl::Status ReadBlock(const json& j, const std::string& path, bool fsdp_on,
                       Block& block) {
  RETURN_IF_ERROR(json_reader::RequireObject(j, path));
  RETURN_IF_ERROR(
      json_reader::ReadInt32(j, "index", path, true, block.index, kIndexRange));
  RETURN_IF_ERROR(ReadBlockOutputs(j, path, block));
  const json* inputs = json_reader::Find(j, "inputs");
  if (inputs == nullptr) return json_reader::Error(path + ".inputs", "missing");
  RETURN_IF_ERROR(json_reader::RequireArray(*inputs, path + ".inputs"));
  for (size_t i = 0; i < inputs->size(); ++i) {
    const std::string ipath = absl::StrCat(path, ".inputs[", i, "]");
    BlockInput in;
    RETURN_IF_ERROR(ReadTensor((*inputs)[i], ipath, in.tensor));
    std::string kind = "carried";
    RETURN_IF_ERROR(ReadString((*inputs)[i], "kind", ipath, false, kind));
    if (kind != "carried" && kind != "shared") {
      return json_reader::Error(ipath + ".kind", "must be \"carried\" or \"shared\"");
    }
    in.kind = kind == "carried" ? InputKind::kCarried : InputKind::kShared;
    block.inputs.push_back(std::move(in));
  }
  const json* ops = json_reader::Find(j, "ops");
  if (ops == nullptr) return json_reader::Error(path + ".ops", "missing");
  RETURN_IF_ERROR(json_reader::RequireArray(*ops, path + ".ops"));
  for (size_t i = 0; i < ops->size(); ++i) {
    Op op;
    RETURN_IF_ERROR(ReadOp((*ops)[i], absl::StrCat(path, ".ops[", i, "]"), op));
    block.ops.push_back(std::move(op));
  }
  return ReadBlockFsdp(j, path, fsdp_on, block.fsdp);
}

absl::Status ReadFixed(const json& j, FixedMemory& f) {
  const std::string path = "fixed";
  RETURN_IF_ERROR(json_reader::RequireObject(j, path));
  const struct {
    const char* key;
    bool required;
    int64_t* out;
  } byte_fields[] = {
      {"param_bytes", true, &f.param_bytes},
      {"optimizer_state_bytes", true, &f.optimizer_state_bytes},
      {"nonblock_grad_bytes", false, &f.nonblock_grad_bytes},
      {"embedding_grad_bytes", false, &f.embedding_grad_bytes},
      {"embedding_saved_bytes", false, &f.embedding_saved_bytes},
      {"embedding_fwd_only_bytes", false, &f.embedding_fwd_only_bytes},
      {"embedding_bwd_workspace_bytes", false, &f.embedding_bwd_workspace_bytes},
      {"head_bytes", false, &f.head_bytes},
      {"optimizer_step_bytes", false, &f.optimizer_step_bytes},
      {"head_fwd_only_bytes", false, &f.head_fwd_only_bytes},
      {"head_bwd_only_bytes", false, &f.head_bwd_only_bytes},
      {"fsdp_root_param_bytes", false, &f.fsdp_root_param_bytes}};
  for (const auto& field : byte_fields) {
    RETURN_IF_ERROR(
        ReadInt(j, field.key, path, field.required, *field.out, kByteRange));
  }
  const std::pair<const char*, double*> time_fields[] = {
      {"head_fwd_ms", &f.head_fwd_ms},
      {"head_bwd_ms", &f.head_bwd_ms},
      {"optimizer_ms", &f.optimizer_ms},
      {"step_overhead_ms", &f.step_overhead_ms}};
  for (const auto& [key, out] : time_fields) {
    RETURN_IF_ERROR(ReadNumber(j, key, path, false, *out, kTimeRange));
  }
  return ReadFixedHostTimes(j, f.host);
}

}  // namespace

absl::StatusOr<Profile> ProfileFromJson(const json& doc) {
  RETURN_IF_ERROR(json_reader::RequireObject(doc, "profile"));
  std::string schema;
  RETURN_IF_ERROR(ReadString(doc, "schema", "", true, schema));
  if (schema != kProfileSchema) {
    return json_reader::Error("schema", absl::StrCat("expected \"", kProfileSchema,
                                                     "\", got \"", schema, "\""));
  }
  Profile p;
  p.source = "user";
  RETURN_IF_ERROR(ReadString(doc, "source", "", false, p.source));
  RETURN_IF_ERROR(ReadString(doc, "kernels", "", false, p.kernels));
  if (p.kernels != "aten" && p.kernels != "fused") {
    return json_reader::Error("kernels", absl::StrCat("expected \"aten\" or \"fused\", got \"",
                                                      p.kernels, "\""));
  }
  if (const json* device = json_reader::Find(doc, "device")) {
    RETURN_IF_ERROR(json_reader::RequireObject(*device, "device"));
    RETURN_IF_ERROR(ReadString(*device, "name", "device", false, p.device));
    RETURN_IF_ERROR(ReadInt(*device, "memory_bytes", "device", false,
                                    p.device_memory_bytes, kByteRange));
    if (const json* link = json_reader::Find(*device, "host_link")) {
      const std::string path = "device.host_link";
      RETURN_IF_ERROR(json_reader::RequireObject(*link, path));
      HostLink& l = p.model.host_link;
      RETURN_IF_ERROR(ReadNumber(*link, "d2h_gbps", path, true, l.d2h_gbps, kBandwidthRange));
      RETURN_IF_ERROR(ReadNumber(*link, "h2d_gbps", path, true, l.h2d_gbps, kBandwidthRange));
      RETURN_IF_ERROR(ReadInt(*link, "host_memory_bytes", path, false, l.host_memory_bytes,
                              kByteRange));
      // Per-copy costs (microseconds, optional: 0 prices copies by bytes).
      for (auto [key, out] : {std::pair{"offload_host_us", &l.offload_host_us},
                              std::pair{"fetch_host_us", &l.fetch_host_us},
                              std::pair{"copy_setup_us", &l.copy_setup_us}}) {
        RETURN_IF_ERROR(ReadNumber(*link, key, path, false, *out, kTimeRange));
      }
    }
  }
  const json* model = json_reader::Find(doc, "model");
  if (model == nullptr) return json_reader::Error("model", "missing");
  RETURN_IF_ERROR(json_reader::RequireObject(*model, "model"));
  RETURN_IF_ERROR(ReadString(*model, "name", "model", true, p.model_name));
  if (const json* config = json_reader::Find(*model, "config")) {
    p.model_config = *config;
  }
  if (const json* measurement = json_reader::Find(doc, "measurement")) {
    RETURN_IF_ERROR(json_reader::RequireObject(*measurement, "measurement"));
    p.measurement = *measurement;
  }
  RETURN_IF_ERROR(ReadParallel(doc, p.model.parallel));
  const json* fixed = json_reader::Find(doc, "fixed");
  if (fixed == nullptr) return json_reader::Error("fixed", "missing");
  RETURN_IF_ERROR(ReadFixed(*fixed, p.model.fixed));
  const json* blocks = json_reader::Find(doc, "blocks");
  if (blocks == nullptr) return json_reader::Error("blocks", "missing");
  RETURN_IF_ERROR(json_reader::RequireArray(*blocks, "blocks"));
  for (size_t i = 0; i < blocks->size(); ++i) {
    Block block;
    RETURN_IF_ERROR(ReadBlock((*blocks)[i], absl::StrCat("blocks[", i, "]"),
                              p.model.parallel.fsdp, block));
    p.model.blocks.push_back(std::move(block));
  }
  RETURN_IF_ERROR(ValidateModel(p.model));
  return p;
}

absl::StatusOr<Profile> ReadProfileFile(const std::string& path) {
  ASSIGN_OR_RETURN(const json doc, json_reader::ReadJsonFile(path));
  auto profile = ProfileFromJson(doc);
  if (!profile.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", profile.status().message()));
  }
  return profile;
}

json ProfileToJson(const Profile& p) {
  json blocks = json::array();
  for (const Block& block : p.model.blocks) {
    json inputs = json::array();
    for (const BlockInput& in : block.inputs) {
      json t = TensorToJson(in.tensor);
      t["kind"] = in.kind == InputKind::kCarried ? "carried" : "shared";
      inputs.push_back(std::move(t));
    }
    json ops = json::array();
    for (const Op& op : block.ops) ops.push_back(OpToJson(op));
    blocks.push_back({{"index", block.index}, {"inputs", inputs}, {"ops", ops}});
    // A single-stream block is written as it always was.
    if (block.outputs.size() == 1) {
      blocks.back()["output"] = block.outputs.front();
    } else {
      blocks.back()["outputs"] = block.outputs;
    }
    if (p.model.parallel.fsdp) blocks.back()["fsdp"] = BlockFsdpToJson(block.fsdp);
  }
  const FixedMemory& f = p.model.fixed;
  json doc = {{"schema", kProfileSchema},
          {"source", p.source},
          {"kernels", p.kernels},
          {"device", {{"name", p.device}, {"memory_bytes", p.device_memory_bytes}}},
          {"model", {{"name", p.model_name}, {"config", p.model_config}}},
          {"fixed",
           {{"param_bytes", f.param_bytes},
            {"optimizer_state_bytes", f.optimizer_state_bytes},
            {"nonblock_grad_bytes", f.nonblock_grad_bytes},
            {"embedding_grad_bytes", f.embedding_grad_bytes},
            {"embedding_saved_bytes", f.embedding_saved_bytes},
            {"head_bytes", f.head_bytes},
            {"head_fwd_only_bytes", f.head_fwd_only_bytes},
            {"optimizer_step_bytes", f.optimizer_step_bytes},
            {"head_fwd_ms", f.head_fwd_ms},
            {"head_bwd_ms", f.head_bwd_ms},
            {"optimizer_ms", f.optimizer_ms},
            {"step_overhead_ms", f.step_overhead_ms}}},
          {"blocks", blocks}};
  if (!p.measurement.empty()) doc["measurement"] = p.measurement;
  // A profile without a host link stays as it was before the field existed.
  if (p.model.host_link.available()) {
    const HostLink& l = p.model.host_link;
    doc["device"]["host_link"] = {{"d2h_gbps", l.d2h_gbps},
                                  {"h2d_gbps", l.h2d_gbps},
                                  {"host_memory_bytes", l.host_memory_bytes}};
    // Written only when set, so profiles without them stay as they were.
    for (auto [key, us] : {std::pair{"offload_host_us", l.offload_host_us},
                           std::pair{"fetch_host_us", l.fetch_host_us},
                           std::pair{"copy_setup_us", l.copy_setup_us}}) {
      if (us != 0) doc["device"]["host_link"][key] = us;
    }
  }
  // A single-rank profile stays as it was before the fields existed.
  if (!p.model.parallel.single_rank()) doc["parallel"] = ParallelToJson(p.model.parallel);
  if (f.head_bwd_only_bytes > 0) {
    doc["fixed"]["head_bwd_only_bytes"] = f.head_bwd_only_bytes;
  }
  if (f.embedding_fwd_only_bytes > 0) {
    doc["fixed"]["embedding_fwd_only_bytes"] = f.embedding_fwd_only_bytes;
  }
  if (f.embedding_bwd_workspace_bytes > 0) {
    doc["fixed"]["embedding_bwd_workspace_bytes"] = f.embedding_bwd_workspace_bytes;
  }
  if (f.fsdp_root_param_bytes > 0) {
    doc["fixed"]["fsdp_root_param_bytes"] = f.fsdp_root_param_bytes;
  }
  FixedHostTimesToJson(f.host, doc["fixed"]);
  return doc;
}

}  // namespace sacplan
