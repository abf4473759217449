#include "sacplan/planner/memory/block_analysis.h"

#include <algorithm>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "memory/grad_schedule.h"
#include "sacplan/planner/ir/op_kinds.h"

namespace sacplan {

int BlockAnalysis::FindOp(const std::string& id) const {
  for (int i = 0; i < op_count(); ++i) {
    if (op_ids[i] == id) return i;
  }
  return -1;
}

absl::StatusOr<BlockAnalysis> AnalyzeBlock(const Block& block) {
  BlockAnalysis a;
  std::unordered_map<std::string, int> tensor_index;
  auto add_tensor = [&](const TensorInfo& info, int producer) {
    TensorNode node;
    node.id = info.id;
    node.bytes = info.bytes;
    node.requires_grad = info.requires_grad;
    node.producer = producer;
    tensor_index[info.id] = static_cast<int>(a.tensors.size());
    a.tensors.push_back(std::move(node));
  };
  for (const BlockInput& in : block.inputs) {
    add_tensor(in.tensor, -1);
    TensorNode& node = a.tensors.back();
    node.carried_input = in.kind == InputKind::kCarried;
    node.shared_input = in.kind == InputKind::kShared;
    if (node.carried_input) {
      node.stream = static_cast<int>(a.carried_inputs.size());
      a.carried_inputs.push_back(static_cast<int>(a.tensors.size()) - 1);
    }
  }
  for (int k = 0; k < static_cast<int>(block.ops.size()); ++k) {
    const Op& op = block.ops[k];
    OpNode node;
    for (const std::string& in : op.inputs) {
      const int t = tensor_index.at(in);
      node.inputs.push_back(t);
      const auto slice = op.input_grad_bytes.find(in);
      node.input_grad_bytes.push_back(slice != op.input_grad_bytes.end()
                                          ? slice->second
                                          : a.tensors[t].bytes);
      // An op reading the same tensor twice consumes it once.
      auto& consumers = a.tensors[t].consumers;
      if (consumers.empty() || consumers.back() != k) consumers.push_back(k);
    }
    for (const TensorInfo& out : op.outputs) {
      add_tensor(out, k);
      node.outputs.push_back(static_cast<int>(a.tensors.size()) - 1);
      node.output_bytes += out.bytes;
    }
    for (const std::string& need : op.backward_needs) {
      const int t = tensor_index.at(need);
      node.backward_needs.push_back(t);
      a.tensors[t].needed_by_backward = true;
    }
    node.fwd_ms = op.fwd_ms;
    // Checkpointing never makes a call cheaper than plain autograd, nor
    // caching an output than not caching it: a measured time below the
    // cheaper one is noise, read as equal. That keeps a plan's added time
    // (TorchSacCheckpointMs) >= 0, and "unsave what the re-run never
    // reaches" (DropUselessSaves) exact.
    node.checkpointed_fwd_extra_ms =
        std::max(op.checkpointed_fwd_ms.value_or(op.fwd_ms) - op.fwd_ms, 0.0);
    node.saved_fwd_extra_ms = std::max(op.saved_fwd_ms.value_or(op.fwd_ms) - op.fwd_ms,
                                       node.checkpointed_fwd_extra_ms);
    node.checkpointed_bwd_extra_ms =
        std::max(op.checkpointed_bwd_ms.value_or(op.bwd_ms) - op.bwd_ms, 0.0);
    node.recompute_ms = op.recompute_ms.value_or(op.fwd_ms);
    node.replay_ms = op.replay_ms.value_or(0.0);
    node.host = Resolve(op.host);
    node.syncs = op.syncs;
    a.has_host_times = a.has_host_times || op.syncs || !op.host.empty();
    node.bwd_ms = op.bwd_ms;
    node.workspace_bytes = op.workspace_bytes;
    node.bwd_workspace_bytes = op.bwd_workspace_bytes;
    node.param_bytes = op.param_bytes;
    node.collective = op.collective;
    node.never_save = op.never_save;
    node.random = op.random;
    node.autocast_cached = op.autocast_cached;
    // Autograd's AddBackward and CloneBackward return the output's gradient
    // itself to every input of its size (with several outputs, the parts'
    // gradients joined first: grad_schedule.cc, JoinParts).
    const GradFlow flow = KindInfo(op.kind).grad_flow;
    node.passes_grad_through = flow == GradFlow::kPassesThrough;
    node.splits_grad = flow == GradFlow::kSplits && op.outputs.size() == 1;
    a.param_bytes += op.param_bytes;
    a.fwd_ms += op.fwd_ms;
    a.bwd_ms += op.bwd_ms;
    a.ops.push_back(std::move(node));
    a.op_ids.push_back(op.id);
  }
  for (const Op& op : block.ops) {
    for (const TensorInfo& out : op.outputs) {
      if (!out.held_until.empty()) {
        a.tensors[tensor_index.at(out.id)].held_until = a.FindOp(out.held_until);
      }
    }
  }
  for (int k = 0; k < a.op_count(); ++k) {
    if (a.ops[k].backward_needs.empty()) continue;
    if (a.first_saving_op < 0) a.first_saving_op = k;
    a.last_saving_op = k;
  }
  if (a.last_saving_op >= 0) {
    const OpNode& last = a.ops[a.last_saving_op];
    for (int need : last.backward_needs) {
      a.last_saving_op_reads_output |= a.tensors[need].producer == a.last_saving_op;
    }
  }
  for (size_t s = 0; s < block.outputs.size(); ++s) {
    const int t = tensor_index.at(block.outputs[s]);
    a.outputs.push_back(t);
    a.tensors[t].block_output = true;
    a.tensors[t].stream = static_cast<int>(s);
    if (a.tensors[t].needed_by_backward) {
      // The output is owned by the next block (as its carried input) and may
      // be freed before this block's backward; nothing here could keep it.
      const std::string field =
          block.outputs.size() == 1 ? ".output" : absl::StrCat(".outputs[", s, "]");
      return absl::InvalidArgumentError(absl::StrCat(
          "blocks[", block.index, "]", field, ": '", block.outputs[s],
          "' is read by the block's own backward; end the block with an op whose "
          "backward does not need its output (e.g. the residual add)"));
    }
  }
  a.gradients = std::make_shared<const BlockGradients>(LowerBlockGradients(a));
  return a;
}

}  // namespace sacplan
