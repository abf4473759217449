#include "sacplan/planner/ir/graph.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "sacplan/planner/ir/checked_math.h"
#include "sacplan/status_macros.h"

namespace sacplan {
namespace {

absl::Status Bad(const Block& block, const std::string& where,
                 const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat("blocks[", block.index, "]", where, ": ", what));
}

absl::Status CheckTensor(const Block& block, const std::string& where,
                         const TensorInfo& tensor) {
  if (tensor.id.empty()) return Bad(block, where + ".id", "must not be empty");
  if (tensor.bytes <= 0) {
    return Bad(block, where + ".bytes",
               absl::StrCat("must be > 0 (tensor '", tensor.id, "' has ",
                            tensor.bytes, ")"));
  }
  for (int64_t dim : tensor.shape) {
    if (dim <= 0) {
      return Bad(block, where + ".shape",
                 absl::StrCat("dimensions must be > 0 (tensor '", tensor.id,
                              "')"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

namespace {

const TensorInfo* FindOutput(const Block& block, const std::string& id) {
  for (const Op& op : block.ops) {
    for (const TensorInfo& out : op.outputs) {
      if (out.id == id) return &out;
    }
  }
  return nullptr;
}

// " (stream s, 'id')" for a block of several streams; single-stream
// messages read as before.
std::string StreamSuffix(const Block& block, size_t s) {
  if (block.outputs.size() == 1) return "";
  return absl::StrCat(" (stream ", s, ", '", block.outputs[s], "')");
}

// Block i's output of stream s is block i+1's s-th carried input, and every
// block reads the same shared inputs, so counts and sizes must agree.
absl::Status CheckBlocksConnect(const std::vector<Block>& blocks) {
  auto carried = [](const Block& block) {
    std::vector<const TensorInfo*> list;
    for (const BlockInput& in : block.inputs) {
      if (in.kind == InputKind::kCarried) list.push_back(&in.tensor);
    }
    return list;
  };
  auto shared = [](const Block& block) {
    std::vector<std::pair<std::string, int64_t>> list;
    for (const BlockInput& in : block.inputs) {
      if (in.kind == InputKind::kShared) list.push_back({in.tensor.id, in.tensor.bytes});
    }
    return list;
  };
  for (size_t i = 0; i + 1 < blocks.size(); ++i) {
    const std::vector<const TensorInfo*> next_in = carried(blocks[i + 1]);
    if (next_in.size() != blocks[i].outputs.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "blocks[", i + 1, "].inputs: ", next_in.size(), " carried inputs but blocks[", i,
          "] has ", blocks[i].outputs.size(),
          " outputs (each output is one carried input of the next block)"));
    }
    for (size_t s = 0; s < next_in.size(); ++s) {
      const TensorInfo* out = FindOutput(blocks[i], blocks[i].outputs[s]);
      if (out != nullptr && out->bytes != next_in[s]->bytes) {
        return absl::InvalidArgumentError(absl::StrCat(
            "blocks[", i + 1, "]: carried input '", next_in[s]->id, "' has ",
            next_in[s]->bytes, " bytes but blocks[", i, "] outputs ", out->bytes,
            StreamSuffix(blocks[i], s)));
      }
    }
    if (shared(blocks[i + 1]) != shared(blocks.front())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "blocks[", i + 1, "].inputs: shared inputs differ from blocks[0]'s "
          "(every block must read the same step-level tensors)"));
    }
  }
  return absl::OkStatus();
}

// held_until names an op of the block that runs no earlier than the
// tensor's producer; block inputs have none (the block's caller holds them).
absl::Status CheckHeldUntil(const Block& block) {
  for (size_t i = 0; i < block.inputs.size(); ++i) {
    if (!block.inputs[i].tensor.held_until.empty()) {
      return Bad(block, absl::StrCat(".inputs[", i, "].held_until"),
                 "only op outputs may give held_until");
    }
  }
  std::map<std::string, size_t> position;
  for (size_t k = 0; k < block.ops.size(); ++k) position[block.ops[k].id] = k;
  for (size_t k = 0; k < block.ops.size(); ++k) {
    for (size_t o = 0; o < block.ops[k].outputs.size(); ++o) {
      const std::string& until = block.ops[k].outputs[o].held_until;
      if (until.empty()) continue;
      const auto found = position.find(until);
      if (found == position.end() || found->second < k) {
        return Bad(block, absl::StrCat(".ops[", k, "].outputs[", o, "].held_until"),
                   absl::StrCat("'", until, "' is not an op of the block at or after '",
                                block.ops[k].id, "'"));
      }
    }
  }
  return absl::OkStatus();
}

// One output per carried input, each a distinct tensor some op produces.
absl::Status CheckOutputs(const Block& block, const std::set<std::string>& defined,
                          size_t carried) {
  const char* field = block.outputs.size() == 1 ? ".output" : ".outputs";
  if (block.outputs.size() != carried) {
    return Bad(block, field,
               absl::StrCat(block.outputs.size(), " outputs for ", carried,
                            " carried inputs (one output per stream)"));
  }
  std::set<std::string> seen;
  for (size_t s = 0; s < block.outputs.size(); ++s) {
    const std::string where =
        block.outputs.size() == 1 ? std::string(field) : absl::StrCat(field, "[", s, "]");
    const std::string& id = block.outputs[s];
    if (!defined.count(id)) {
      return Bad(block, where, absl::StrCat("'", id, "' is not a tensor of the block"));
    }
    for (const BlockInput& in : block.inputs) {
      if (in.tensor.id == id) {
        return Bad(block, where, "must be produced by an op, not an input");
      }
    }
    if (!seen.insert(id).second) {
      return Bad(block, where, absl::StrCat("'", id, "' is listed twice"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateBlock(const Block& block) {
  std::set<std::string> defined;
  std::map<std::string, int64_t> tensor_bytes;  // of every tensor defined so far
  std::set<std::string> op_ids;
  size_t carried = 0;
  for (size_t i = 0; i < block.inputs.size(); ++i) {
    const std::string where = absl::StrCat(".inputs[", i, "]");
    RETURN_IF_ERROR(CheckTensor(block, where, block.inputs[i].tensor));
    tensor_bytes[block.inputs[i].tensor.id] = block.inputs[i].tensor.bytes;
    if (!defined.insert(block.inputs[i].tensor.id).second) {
      return Bad(block, where + ".id",
                 absl::StrCat("duplicate tensor id '", block.inputs[i].tensor.id,
                              "'"));
    }
    if (block.inputs[i].kind == InputKind::kCarried) ++carried;
  }
  if (carried == 0) {
    return Bad(block, ".inputs", "needs at least one carried input (a stream), has 0");
  }
  if (block.ops.empty()) return Bad(block, ".ops", "must not be empty");
  for (size_t k = 0; k < block.ops.size(); ++k) {
    const Op& op = block.ops[k];
    const std::string where = absl::StrCat(".ops[", k, "]");
    if (op.id.empty()) return Bad(block, where + ".id", "must not be empty");
    if (!op_ids.insert(op.id).second) {
      return Bad(block, where + ".id",
                 absl::StrCat("duplicate op id '", op.id, "'"));
    }
    for (const std::string& in : op.inputs) {
      if (!defined.count(in)) {
        return Bad(block, where + ".inputs",
                   absl::StrCat("op '", op.id, "' reads '", in,
                                "' before any op produces it (unknown tensor "
                                "or a cycle in the op graph)"));
      }
    }
    if (op.outputs.empty()) {
      return Bad(block, where + ".outputs",
                 absl::StrCat("op '", op.id, "' must produce a tensor"));
    }
    std::set<std::string> own(op.inputs.begin(), op.inputs.end());
    for (size_t o = 0; o < op.outputs.size(); ++o) {
      const std::string owhere = absl::StrCat(where, ".outputs[", o, "]");
      RETURN_IF_ERROR(CheckTensor(block, owhere, op.outputs[o]));
      if (!defined.insert(op.outputs[o].id).second) {
        return Bad(block, owhere + ".id",
                   absl::StrCat("duplicate tensor id '", op.outputs[o].id, "'"));
      }
      own.insert(op.outputs[o].id);
      tensor_bytes[op.outputs[o].id] = op.outputs[o].bytes;
    }
    for (const std::string& need : op.backward_needs) {
      if (!own.count(need)) {
        return Bad(block, where + ".backward_needs",
                   absl::StrCat("op '", op.id, "' backward needs '", need,
                                "', which is neither its input nor its output"));
      }
    }
    for (const auto& [in, grad_bytes] : op.input_grad_bytes) {
      if (!std::count(op.inputs.begin(), op.inputs.end(), in)) {
        return Bad(block, where + ".input_grad_bytes",
                   absl::StrCat("op '", op.id, "' gives a gradient size for '", in,
                                "', which is not its input"));
      }
      const int64_t whole = tensor_bytes.at(in);
      if (grad_bytes <= 0 || grad_bytes >= whole) {
        return Bad(block, where + ".input_grad_bytes",
                   absl::StrCat("op '", op.id, "': the gradient of the slice of '", in,
                                "' it reads must be more than 0 and less than the "
                                "tensor's ", whole, " bytes, got ", grad_bytes));
      }
    }
    // Written so that NaN fails too.
    const bool finite = std::isfinite(op.fwd_ms) && std::isfinite(op.bwd_ms) &&
                        std::isfinite(op.flops) && std::isfinite(op.bytes_moved);
    if (!finite || !(op.fwd_ms >= 0 && op.bwd_ms >= 0 && op.flops >= 0 &&
                     op.bytes_moved >= 0)) {
      return Bad(block, where,
                 absl::StrCat("op '", op.id,
                              "': times, flops and bytes must be finite and >= 0"));
    }
    RETURN_IF_ERROR(
        ValidateHostTimes(op.host, absl::StrCat("blocks[", block.index, "]", where, ".host")));
    if (op.workspace_bytes < 0 || op.bwd_workspace_bytes < 0 ||
        op.param_bytes < 0) {
      return Bad(block, where,
                 absl::StrCat("op '", op.id,
                              "': workspace and param bytes must be >= 0"));
    }
  }
  RETURN_IF_ERROR(CheckHeldUntil(block));
  return CheckOutputs(block, defined, carried);
}

namespace {

// Sums every byte count against kMaxModelTotalBytes and every time for
// finiteness (each time may be finite while their sum is not).
absl::Status CheckTotals(const Model& model) {
  int64_t total = 0;
  double total_ms = 0;
  bool fits = true;
  auto add = [&](int64_t bytes) {
    fits = fits && AddWithin(bytes, kMaxModelTotalBytes, total);
  };
  for (const Block& block : model.blocks) {
    for (const BlockInput& in : block.inputs) add(in.tensor.bytes);
    for (const Op& op : block.ops) {
      for (const TensorInfo& out : op.outputs) add(out.bytes);
      for (int64_t bytes : {op.workspace_bytes, op.bwd_workspace_bytes, op.param_bytes}) add(bytes);
      total_ms += op.fwd_ms + op.bwd_ms + op.checkpointed_fwd_ms.value_or(0) +
                  op.saved_fwd_ms.value_or(0) + op.checkpointed_bwd_ms.value_or(0) +
                  op.recompute_ms.value_or(0) + op.replay_ms.value_or(0);
      const ResolvedHostTimes h = Resolve(op.host);
      total_ms += h.fwd_ms + h.bwd_ms + h.checkpointed_fwd_ms + h.saved_fwd_ms +
                  h.checkpointed_bwd_ms + h.recompute_ms + h.replay_ms;
    }
    const BlockFsdp& g = block.fsdp;
    for (int64_t bytes : {g.unsharded_param_bytes, g.sharded_grad_bytes, g.reduce_scatter_bytes,
                          g.all_gather_workspace_bytes, g.reduce_scatter_workspace_bytes}) {
      add(bytes);
    }
    total_ms += block.fsdp.all_gather_ms + block.fsdp.reduce_scatter_ms;
  }
  const FixedMemory& f = model.fixed;
  for (int64_t bytes : {f.param_bytes, f.optimizer_state_bytes, f.nonblock_grad_bytes,
                        f.embedding_grad_bytes, f.embedding_saved_bytes,
                        f.embedding_fwd_only_bytes, f.embedding_bwd_workspace_bytes,
                        f.head_bytes, f.fsdp_root_param_bytes,
                        f.optimizer_step_bytes}) {
    add(bytes);
  }
  if (!fits) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the model's byte counts add up to more than 2^62 bytes (", kMaxModelTotalBytes,
        "); a step's memory could not be counted in int64"));
  }
  if (!std::isfinite(total_ms + f.head_fwd_ms + f.head_bwd_ms + f.optimizer_ms +
                     f.step_overhead_ms + f.host.head_fwd_ms + f.host.head_bwd_ms +
                     f.host.optimizer_ms)) {
    return absl::InvalidArgumentError(
        "the model's op times add up to more than a double holds");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateModel(const Model& model) {
  if (model.blocks.empty()) {
    return absl::InvalidArgumentError("blocks: must not be empty");
  }
  for (size_t i = 0; i < model.blocks.size(); ++i) {
    if (model.blocks[i].index != static_cast<int>(i)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "blocks[", i, "].index: expected ", i, ", got ",
          model.blocks[i].index));
    }
    RETURN_IF_ERROR(ValidateBlock(model.blocks[i]));
  }
  RETURN_IF_ERROR(CheckBlocksConnect(model.blocks));
  RETURN_IF_ERROR(ValidateParallelConfig(model.parallel));
  if (model.fixed.fsdp_root_param_bytes > 0 && !model.parallel.fsdp) {
    return absl::InvalidArgumentError(
        "fixed.fsdp_root_param_bytes: needs parallel.fsdp (no root is gathered without FSDP)");
  }
  for (size_t i = 0; i < model.blocks.size(); ++i) {
    RETURN_IF_ERROR(ValidateBlockFsdp(model.blocks[i].fsdp, model.parallel.fsdp,
                                      static_cast<int>(i)));
  }
  const FixedMemory& f = model.fixed;
  if (f.param_bytes < 0 || f.optimizer_state_bytes < 0 ||
      f.nonblock_grad_bytes < 0 || f.embedding_grad_bytes < 0 ||
      f.embedding_saved_bytes < 0 || f.embedding_fwd_only_bytes < 0 ||
      f.embedding_bwd_workspace_bytes < 0 || f.head_bytes < 0 ||
      f.optimizer_step_bytes < 0 || f.fsdp_root_param_bytes < 0) {
    return absl::InvalidArgumentError("fixed: byte counts must be >= 0");
  }
  if (f.head_fwd_only_bytes < 0 || f.head_fwd_only_bytes > f.head_bytes) {
    return absl::InvalidArgumentError(
        "fixed.head_fwd_only_bytes: must be >= 0 and at most head_bytes");
  }
  if (f.head_bwd_only_bytes < 0 ||
      f.head_bwd_only_bytes > f.head_bytes - f.head_fwd_only_bytes) {
    return absl::InvalidArgumentError(
        "fixed.head_bwd_only_bytes: must be >= 0 and at most head_bytes - "
        "head_fwd_only_bytes");
  }
  if (!(f.head_fwd_ms >= 0 && f.head_bwd_ms >= 0 && f.optimizer_ms >= 0 &&
        f.step_overhead_ms >= 0 &&
        std::isfinite(f.head_fwd_ms + f.head_bwd_ms + f.optimizer_ms + f.step_overhead_ms))) {
    return absl::InvalidArgumentError("fixed: times must be finite and >= 0");
  }
  const HostLink& link = model.host_link;
  if (!(std::isfinite(link.d2h_gbps) && std::isfinite(link.h2d_gbps) && link.d2h_gbps >= 0 &&
        link.h2d_gbps >= 0 && link.host_memory_bytes >= 0)) {
    return absl::InvalidArgumentError(
        "device.host_link: bandwidths must be finite and >= 0, host_memory_bytes >= 0");
  }
  for (const auto& [key, us] : {std::pair{"offload_host_us", link.offload_host_us},
                                {"fetch_host_us", link.fetch_host_us},
                                {"copy_setup_us", link.copy_setup_us}}) {
    if (!(std::isfinite(us) && us >= 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("device.host_link.", key, ": must be finite and >= 0"));
    }
  }
  if ((link.d2h_gbps > 0) != (link.h2d_gbps > 0)) {
    return absl::InvalidArgumentError(
        "device.host_link: d2h_gbps and h2d_gbps must both be > 0 (a link) or both 0 (none)");
  }
  RETURN_IF_ERROR(ValidateHostTimes(f.host, "fixed.host"));
  return CheckTotals(model);
}

namespace {

bool SameTensor(const TensorInfo& a, const TensorInfo& b) {
  return a.id == b.id && a.bytes == b.bytes &&
         a.requires_grad == b.requires_grad;
}

// Times aside, everything that decides an op's memory: its identity, what
// its backward reads and the bytes it allocates.
bool SameOpMemory(const Op& a, const Op& b) {
  const auto memory = [](const Op& op) {
    return std::tie(op.backward_needs, op.workspace_bytes, op.bwd_workspace_bytes, op.param_bytes,
                    op.collective, op.never_save, op.autocast_cached, op.input_grad_bytes);
  };
  if (OpIdentity(a) != OpIdentity(b) || memory(a) != memory(b) ||
      a.outputs.size() != b.outputs.size()) {
    return false;
  }
  for (size_t i = 0; i < a.outputs.size(); ++i) {
    if (!SameTensor(a.outputs[i], b.outputs[i])) return false;
  }
  return true;
}

bool SameOpTimes(const Op& a, const Op& b) {
  const auto times = [](const Op& op) {
    return std::tie(op.fwd_ms, op.bwd_ms, op.checkpointed_fwd_ms, op.saved_fwd_ms,
                    op.checkpointed_bwd_ms, op.recompute_ms, op.replay_ms, op.host, op.syncs);
  };
  return times(a) == times(b);
}

}  // namespace

std::vector<std::string_view> OpIdentity(const Op& op) {
  std::vector<std::string_view> identity = {op.id, op.kind};
  for (const std::string& in : op.inputs) identity.push_back(in);
  identity.push_back("->");
  for (const TensorInfo& out : op.outputs) identity.push_back(out.id);
  // Only ops that draw random numbers carry the mark, so graphs without any
  // keep the fingerprints they had.
  if (op.random) identity.push_back("!random");
  return identity;
}

bool SameMemoryStructure(const Block& a, const Block& b) {
  if (a.outputs != b.outputs || a.inputs.size() != b.inputs.size() ||
      a.ops.size() != b.ops.size()) {
    return false;
  }
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    if (a.inputs[i].kind != b.inputs[i].kind ||
        !SameTensor(a.inputs[i].tensor, b.inputs[i].tensor)) {
      return false;
    }
  }
  for (size_t i = 0; i < a.ops.size(); ++i) {
    if (!SameOpMemory(a.ops[i], b.ops[i])) return false;
  }
  return true;
}

bool SameStructure(const Block& a, const Block& b) {
  // Times first: blocks of one memory structure timed one by one (a
  // captured model's) differ there, and comparing them costs a fraction of
  // comparing every op's names and tensors. The solver compares each block
  // with every one before it.
  if (a.ops.size() != b.ops.size()) return false;
  for (size_t i = 0; i < a.ops.size(); ++i) {
    if (!SameOpTimes(a.ops[i], b.ops[i])) return false;
  }
  return SameMemoryStructure(a, b);
}

}  // namespace sacplan
