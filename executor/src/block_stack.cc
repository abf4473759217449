// The block stack: forward and backward of every block by its lowered
// schedule over real tensors, as one autograd node (offload's host copies:
// block_offload.cc).
#include "block_stack.h"

#include <chrono>
#include <string>
#include <utility>

#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>

#include "block_offload.h"
#include "sacplan/metering/memory_meter.h"
#include "stack_state.h"

namespace sacplan::executor_internal {
namespace {

using torch::autograd::variable_list;

// Whether another tensor shares t's storage (an alias the schedule tracks).
bool StorageShared(const at::Tensor& t) { return t.storage().use_count() > 1; }

// Files one input gradient the op's backward returned where the schedule's
// GradInput says (the simulator counts the same buffers), checking that the
// tensors really share what the schedule says they share.
void FileGradient(const BlockAnalysis& block, const OpNode& node, const GradInput& g,
                  at::Tensor grad, TensorTable& grads, at::Tensor& shared_grad) {
  const int t = node.inputs[g.input];
  at::Tensor& slot = grads[t];
  switch (g.kind) {
    case GradKind::kNew:
    case GradKind::kAlias: {
      TORCH_CHECK(!slot.defined(), "sacplan executor: the gradient of '",
                  block.tensors[t].id, "' is live where the schedule makes a new one");
      const at::Tensor& from = grads[node.outputs[0]];
      const bool aliases = from.defined() && grad.storage().is_alias_of(from.storage());
      TORCH_CHECK(aliases == (g.kind == GradKind::kAlias), "sacplan executor: the "
                  "gradient of '", block.tensors[t].id, "' ",
                  aliases ? "aliases" : "does not alias",
                  " its op's output gradient, the schedule says otherwise");
      slot = std::move(grad);
      return;
    }
    case GradKind::kAddInPlace:
      TORCH_CHECK(slot.defined() && !StorageShared(slot), "sacplan executor: the "
                  "gradient of '", block.tensors[t].id, "' is not a live unshared "
                  "buffer where the schedule adds into it in place");
      slot.add_(grad);
      return;
    case GradKind::kAddToNew:
      TORCH_CHECK(slot.defined() && StorageShared(slot), "sacplan executor: the "
                  "gradient of '", block.tensors[t].id, "' is not a live shared "
                  "buffer where the schedule adds it into a new one");
      slot = slot + grad;
      return;
    case GradKind::kAddToShared:
      if (shared_grad.defined()) shared_grad.add_(grad);
      return;
    case GradKind::kNewSlice:
    case GradKind::kAliasSlice:
      TORCH_CHECK(false, "sacplan executor: '", block.tensors[t].id,
                  "' takes a slice gradient; the LibTorch models read no slices");
  }
}

std::vector<at::Tensor> Gather(const TensorTable& table,
                               const std::vector<int>& indices,
                               const BlockAnalysis& block) {
  std::vector<at::Tensor> tensors;
  tensors.reserve(indices.size());
  for (int t : indices) {
    TORCH_CHECK(table[t].defined(), "sacplan executor: tensor '",
                block.tensors[t].id, "' is not live where the schedule reads it");
    tensors.push_back(table[t]);
  }
  return tensors;
}

void RunOpForward(const StackState& state, int b, int k, TensorTable& table) {
  const BlockAnalysis& block = state.analyzed->blocks[b];
  const OpNode& node = block.ops[k];
  std::vector<at::Tensor> outputs =
      state.model->op(b, k).Forward(Gather(table, node.inputs, block));
  TORCH_CHECK(outputs.size() == node.outputs.size(), "sacplan executor: op '",
              block.op_ids[k], "' returned ", outputs.size(), " outputs, graph has ",
              node.outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    table[node.outputs[i]] = std::move(outputs[i]);
  }
}

// Runs one schedule step through `run`, timing it for the observer if any.
template <typename Run>
void Timed(const StackState& state, int b, const ScheduleStep& step, Run run) {
  if (!state.counter->observer) {
    run();
    return;
  }
  const double start_cpu_ms = ProcessCpuMs();
  const auto start = std::chrono::steady_clock::now();
  run();
  const auto end = std::chrono::steady_clock::now();
  const double end_cpu_ms = ProcessCpuMs();
  state.counter->observer({b, step.op, step.kind,
                           std::chrono::duration<double, std::milli>(end - start).count(),
                           end_cpu_ms - start_cpu_ms});
}

void Observe(const StackState& state, Phase phase, int b, int k) {
  if (state.observer == nullptr || !*state.observer) return;
  (*state.observer)({phase, b, state.analyzed->blocks[b].op_ids[k]});
}

// Forward of block b: the carried input and shared inputs in, the block
// output out; the table keeps what the schedule keeps.
at::Tensor ForwardBlock(StackState& state, int b, at::Tensor carried) {
  const BlockAnalysis& block = state.analyzed->blocks[b];
  TensorTable& table = state.live[b];
  table.assign(block.tensors.size(), at::Tensor());
  table[block.carried_inputs.front()] = std::move(carried);
  for (size_t t = 0; t < state.shared_slot[b].size(); ++t) {
    if (state.shared_slot[b][t] >= 0) table[t] = state.shared[state.shared_slot[b][t]];
  }
  const BlockSchedule& schedule = (*state.schedules)[b];
  state.host[b].assign(schedule.offload.copies.size(), at::Tensor());
  OffloadAfter(state, b, -1, table);
  for (size_t k = 0; k < schedule.forward.size(); ++k) {
    SpillBefore(state, b, static_cast<int>(k));
    const ScheduleStep& step = schedule.forward[k];
    Timed(state, b, step, [&] {
      ScopedMemoryAccount account(Account(MemoryCategory::kForwardLive));
      RunOpForward(state, b, step.op, table);
    });
    for (int out : block.ops[step.op].outputs) {
      if (schedule.kept[out] || block.tensors[out].block_output) {
        ChargeStorageTo(table[out], Account(MemoryCategory::kKept));
      }
    }
    Observe(state, Phase::kForward, b, step.op);
    FreeAll(table, step.free_after);
    OffloadAfter(state, b, static_cast<int>(k), table);
  }
  // With a spill window the copies run on into the next block's forward.
  if (!schedule.offload.copies.empty() && schedule.offload.spill_trigger < 0) {
    state.copies->FinishCopiesToHost();
  }
  // The output now belongs to the next block (or the head). A block whose
  // checkpoint cache holds it (torch-sac) keeps a reference until the
  // backward step its schedule frees it after.
  if (schedule.holds_output.front()) return table[block.outputs.front()];
  return std::exchange(table[block.outputs.front()], at::Tensor());
}

void RunOpBackward(StackState& state, int b, const ScheduleStep& step,
                   TensorTable& table, TensorTable& grads,
                   std::vector<at::Tensor>& shared_grads) {
  const int k = step.op;
  const BlockAnalysis& block = state.analyzed->blocks[b];
  const OpNode& node = block.ops[k];
  const TorchOp& op = state.model->op(b, k);
  std::vector<bool> needed(block.tensors.size(), false);
  for (int t : node.backward_needs) needed[t] = true;
  OpSaved saved;
  for (int t : node.inputs) saved.inputs.push_back(needed[t] ? table[t] : at::Tensor());
  for (int t : node.outputs) saved.outputs.push_back(needed[t] ? table[t] : at::Tensor());
  for (int t : node.backward_needs) {
    TORCH_CHECK(table[t].defined(), "sacplan executor: op '", block.op_ids[k],
                "' needs '", block.tensors[t].id, "' in backward but it is not live");
  }
  std::vector<at::Tensor> grad_outputs;
  for (int t : node.outputs) grad_outputs.push_back(grads[t]);

  ScopedMemoryAccount account(Account(MemoryCategory::kActivationGrads));
  OpGrads result = op.Backward(saved, grad_outputs);
  saved = OpSaved();
  grad_outputs.clear();
  TORCH_CHECK(result.inputs.size() == node.inputs.size(), "sacplan executor: op '",
              block.op_ids[k], "' backward returned ", result.inputs.size(),
              " input gradients for ", node.inputs.size(), " inputs");
  const BlockSchedule& schedule = (*state.schedules)[b];
  for (const GradInput& g : Entries(schedule.grads.input_grads, step.input_grads)) {
    const int t = node.inputs[g.input];
    if (!result.inputs[g.input].defined()) continue;
    // Block inputs come first among the tensors, so t indexes shared_slot.
    const int slot = block.tensors[t].shared_input ? state.shared_slot[b][t] : -1;
    at::Tensor unused;
    FileGradient(block, node, g, std::move(result.inputs[g.input]), grads,
                 slot >= 0 ? shared_grads[slot] : unused);
  }
  result.inputs.clear();
  std::vector<at::Tensor> params = op.Params();
  TORCH_CHECK(result.params.size() == params.size(), "sacplan executor: op '",
              block.op_ids[k], "' backward returned ", result.params.size(),
              " parameter gradients for ", params.size(), " parameters");
  for (size_t p = 0; p < params.size(); ++p) {
    ChargeStorageTo(result.params[p], Account(MemoryCategory::kParamGrads));
    at::Tensor& grad = params[p].mutable_grad();
    if (grad.defined()) {
      grad.add_(result.params[p]);
    } else {
      grad = std::move(result.params[p]);
    }
  }
  result.params.clear();
  Observe(state, Phase::kBackward, b, k);
  FreeAll(grads, Entries(schedule.grads.grad_drops, step.grad_drops));
  for (int t : node.outputs) {
    TORCH_CHECK(!grads[t].defined(), "sacplan executor: the gradient of '",
                block.tensors[t].id, "' outlives its producer's backward");
  }
}

// Backward of block b: the output's gradient in, the carried input's out.
at::Tensor BackwardBlock(StackState& state, int b, at::Tensor grad_output,
                         std::vector<at::Tensor>& shared_grads) {
  const BlockAnalysis& block = state.analyzed->blocks[b];
  const BlockSchedule& schedule = (*state.schedules)[b];
  TensorTable& table = state.live[b];
  TensorTable grads(block.tensors.size());
  grads[block.outputs.front()] = std::move(grad_output);
  FreeWithHostCopies(state, b, table, schedule.free_at_backward_start);
  for (size_t s = 0; s < schedule.backward.size(); ++s) {
    const ScheduleStep& step = schedule.backward[s];
    LeadBefore(state, b, step);
    PrefetchBefore(state, b, static_cast<int>(s), table);
    if (!schedule.offload.copies.empty()) {
      for (int t : StepReads(block, step)) state.copies->BeforeRead(table[t]);
    }
    if (step.kind == StepKind::kRecompute) {
      Timed(state, b, step, [&] {
        ScopedMemoryAccount account(Account(MemoryCategory::kRecomputed));
        RunOpForward(state, b, step.op, table);
      });
      Observe(state, Phase::kRecompute, b, step.op);
      state.counter->recomputed_ops += 1;
    } else {
      Timed(state, b, step,
            [&] { RunOpBackward(state, b, step, table, grads, shared_grads); });
    }
    FreeWithHostCopies(state, b, table, step.free_after);
  }
  table.clear();
  state.host[b].clear();
  return std::move(grads[block.carried_inputs.front()]);
}

class BlockStackBackward : public torch::autograd::Node {
 public:
  explicit BlockStackBackward(std::shared_ptr<StackState> state)
      : state_(std::move(state)) {}

  std::string name() const override { return "sacplan::BlockStackBackward"; }

  variable_list apply(variable_list&& grad_outputs) override {
    TORCH_CHECK(state_ != nullptr,
                "sacplan executor: the blocks' backward ran twice (retain_graph "
                "is not supported: the plan frees what it used)");
    std::shared_ptr<StackState> state = std::move(state_);
    state->counter->recomputed_ops = 0;
    // Gradients of the shared inputs, accumulated across blocks; allocated
    // once, as the simulator counts them.
    std::vector<at::Tensor> shared_grads(state->shared.size());
    const BlockAnalysis& first = state->analyzed->blocks.front();
    ChargeStorageTo(grad_outputs[0], Account(MemoryCategory::kActivationGrads));
    for (size_t t = 0; t < state->shared_slot[0].size(); ++t) {
      const int slot = state->shared_slot[0][t];
      if (slot >= 0 && first.tensors[t].requires_grad) {
        ScopedMemoryAccount account(Account(MemoryCategory::kActivationGrads));
        shared_grads[slot] = at::zeros_like(state->shared[slot]);
      }
    }
    at::Tensor grad = std::move(grad_outputs[0]);
    for (int b = static_cast<int>(state->live.size()) - 1; b >= 0; --b) {
      grad = BackwardBlock(*state, b, std::move(grad), shared_grads);
    }
    variable_list result;
    result.push_back(std::move(grad));
    for (at::Tensor& g : shared_grads) result.push_back(std::move(g));
    return result;
  }

  void release_variables() override { state_.reset(); }

 private:
  std::shared_ptr<StackState> state_;
};

}  // namespace

at::Tensor RunBlockStack(const TorchModel& model, const AnalyzedModel& analyzed,
                         const std::vector<BlockSchedule>& schedules,
                         BlockStackInputs& inputs,
                         std::shared_ptr<RecomputeCounter> counter,
                         const MomentObserver* observer) {
  auto state = std::make_shared<StackState>();
  state->observer = observer;
  state->model = &model;
  state->analyzed = &analyzed;
  state->schedules = &schedules;
  state->counter = std::move(counter);
  state->shared = inputs.shared;
  state->live.resize(analyzed.blocks.size());
  state->host.resize(analyzed.blocks.size());
  state->counter->host->peak = state->counter->host->live;
  state->shared_slot.resize(analyzed.blocks.size());
  const Model& graph = *analyzed.model;
  for (size_t b = 0; b < graph.blocks.size(); ++b) {
    int next_slot = 0;
    for (const BlockInput& input : graph.blocks[b].inputs) {
      const bool shared = input.kind == InputKind::kShared;
      state->shared_slot[b].push_back(shared ? next_slot++ : -1);
    }
    TORCH_CHECK(next_slot == static_cast<int>(inputs.shared.size()),
                "sacplan executor: block ", b, " has ", next_slot,
                " shared inputs, the embeddings gave ", inputs.shared.size());
  }

  bool needs_grad = at::GradMode::is_enabled() && inputs.carried.requires_grad();
  for (const at::Tensor& t : inputs.shared) {
    needs_grad |= at::GradMode::is_enabled() && t.defined() && t.requires_grad();
  }
  torch::autograd::edge_list next_edges;
  if (needs_grad) {
    next_edges.push_back(torch::autograd::impl::gradient_edge(inputs.carried));
    for (const at::Tensor& t : inputs.shared) {
      next_edges.push_back(t.defined() && t.requires_grad()
                               ? torch::autograd::impl::gradient_edge(t)
                               : torch::autograd::Edge());
    }
  }

  at::Tensor output;
  {
    at::NoGradGuard no_grad;
    at::Tensor carried = std::move(inputs.carried);
    ChargeStorageTo(carried, Account(MemoryCategory::kKept));
    for (const at::Tensor& t : state->shared) {
      ChargeStorageTo(t, Account(MemoryCategory::kSharedInputs));
    }
    for (size_t b = 0; b < analyzed.blocks.size(); ++b) {
      carried = ForwardBlock(*state, static_cast<int>(b), std::move(carried));
    }
    output = std::move(carried);
  }
  if (!needs_grad) return output;
  auto node = std::shared_ptr<BlockStackBackward>(new BlockStackBackward(state),
                                                  torch::autograd::deleteNode);
  node->set_next_edges(std::move(next_edges));
  torch::autograd::set_history(output, node);
  return output;
}

}  // namespace sacplan::executor_internal
