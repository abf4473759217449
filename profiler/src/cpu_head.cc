// The CPU profiler outside the blocks: embeddings, head and loss, and the
// optimizer step.
#include <algorithm>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include "absl/strings/str_cat.h"
#include "cpu_measure.h"
#include "sacplan/planner/ir/bytes.h"
#include "sacplan/planner/memory/outside_blocks.h"

namespace sacplan::cpu_profiler_internal {
namespace {

// Learning rates do not change the cost of a step; these keep the
// parameters finite over the repeated steps.
constexpr double kLearningRate = 1e-5;
constexpr double kSgdMomentum = 0.9;

void DropGrads(const std::vector<at::Tensor>& tensors) {
  for (const at::Tensor& t : tensors) {
    // set_to_none, as zero_grad does by default: every step allocates its
    // gradients afresh.
    if (t.defined() && t.grad().defined()) t.mutable_grad().reset();
  }
}

int64_t GradBytes(const std::vector<at::Tensor>& tensors) {
  int64_t bytes = 0;
  for (const at::Tensor& t : tensors) {
    if (t.grad().defined()) bytes += t.grad().nbytes();
  }
  return bytes;
}

ProfileNote Differs(const std::string& what, int64_t measured, int64_t graph) {
  return {ProfileNoteKind::kSizeDiffers,
          absl::StrCat(what, ": measured ", FormatBytes(measured), " (", measured,
                       " B), the graph builder says ", FormatBytes(graph), " (",
                       graph, " B); the profile keeps the graph's")};
}

// What the embeddings' autograd graph holds for their backward (the text
// embedding's input, activations inside the MLPs): Embed with grad mode on,
// then its outputs dropped while their graph is kept, so that what stays
// allocated is what the graph saved. The outputs themselves the simulator
// counts as the carried and shared inputs; the batch and constant buffers
// were allocated before and are not counted.
int64_t EmbeddingSavedBytes(const TorchModel& model, const Batch& batch,
                            MemoryMeter& meter) {
  c10::AutoGradMode grad_mode(true);
  const int64_t before = meter.Read().allocated_bytes;
  std::vector<std::shared_ptr<torch::autograd::Node>> graph;
  {
    BlockStackInputs in = model.Embed(batch);
    std::vector<at::Tensor> outs = {in.carried};
    outs.insert(outs.end(), in.shared.begin(), in.shared.end());
    for (const at::Tensor& t : outs) {
      if (t.defined() && t.grad_fn() != nullptr) graph.push_back(t.grad_fn());
    }
  }
  const int64_t saved_bytes = meter.Read().allocated_bytes - before;
  graph.clear();
  return std::max<int64_t>(0, saved_bytes);
}

// Whether the head's autograd graph keeps its input (the last block's
// output) for its backward: Wan's LayerNorm reads it in fp32 as it is and
// saves it; LLaMA's RMSNorm saves its fp32 copy, and the output is freed
// once the head's forward has read it. A view of `last_out` goes in, so
// that only what the graph saves (not the leaf's gradient accumulator)
// adds a reference to its storage.
bool HeadKeepsItsInput(const TorchModel& model, const at::Tensor& last_out,
                       const BlockStackInputs& leaves, const Batch& batch) {
  const at::Tensor input = last_out.view_as(last_out);
  const auto refs_before = input.storage().use_count();
  const at::Tensor loss = model.Loss(input, leaves, batch);
  return input.storage().use_count() > refs_before;
}

// Embed + Loss, forward and backward: head times and head_bytes.
void MeasureHead(const TorchModel& model, const Batch& batch, MemoryMeter& meter,
                 RunTimer& timer, const CpuProfileOptions& options, FixedMemory& fixed,
                 std::vector<ProfileNote>& notes) {
  const Model& graph = model.graph();
  const std::vector<at::Tensor> params = model.Parameters();
  c10::AutoGradMode grad_mode(true);

  // Embeddings forward, as in training (recording autograd).
  BlockStackInputs in;
  const RunStats embed_fwd = MeasureRuns(
      meter, timer, options, "embed:fwd", [&] { in = BlockStackInputs(); },
      [&] { in = model.Embed(batch); });
  // Embeddings backward from random gradients of what they hand the blocks.
  at::manual_seed(options.seed + 2);
  std::vector<at::Tensor> embed_outs, embed_grads;
  auto collect = [&] {
    embed_outs.clear();
    embed_grads.clear();
    std::vector<at::Tensor> all = {in.carried};
    all.insert(all.end(), in.shared.begin(), in.shared.end());
    for (const at::Tensor& t : all) {
      if (!t.requires_grad()) continue;
      embed_outs.push_back(t);
      embed_grads.push_back(at::randn(t.sizes(), t.options()));
    }
  };
  const RunStats embed_bwd = MeasureRuns(
      meter, timer, options, "embed:bwd",
      [&] {
        DropGrads(params);
        in = model.Embed(batch);
        collect();
      },
      [&] { torch::autograd::backward(embed_outs, embed_grads); });
  embed_outs.clear();
  embed_grads.clear();
  DropGrads(params);
  fixed.embedding_saved_bytes = EmbeddingSavedBytes(model, batch, meter);
  {
    c10::NoGradGuard no_grad;
    in = model.Embed(batch);
  }

  // The head's inputs as leaves: the last block's output (the residual
  // stream has the carried input's shape) and the shared inputs.
  const Block& first = graph.blocks.front();
  const Block& last = graph.blocks.back();
  at::Tensor last_out = at::randn(in.carried.sizes(), in.carried.options());
  last_out.requires_grad_(true);
  BlockStackInputs leaves;
  leaves.carried = in.carried;
  int64_t shared_grad_bytes = 0;
  size_t s = 0;
  for (const BlockInput& input : first.inputs) {
    if (input.kind != InputKind::kShared) continue;
    at::Tensor leaf = in.shared.at(s++).detach();
    if (input.tensor.requires_grad && at::isFloatingType(leaf.scalar_type())) {
      leaf.requires_grad_(true);
      shared_grad_bytes += input.tensor.bytes;
    }
    leaves.shared.push_back(leaf);
  }
  std::vector<at::Tensor> head_inputs = leaves.shared;
  head_inputs.push_back(last_out);

  at::Tensor loss;
  const RunStats loss_fwd = MeasureRuns(
      meter, timer, options, "loss:fwd", [&] { loss = at::Tensor(); },
      [&] { loss = model.Loss(last_out, leaves, batch); });
  const RunStats loss_bwd = MeasureRuns(
      meter, timer, options, "loss:bwd",
      [&] {
        DropGrads(params);
        DropGrads(head_inputs);
        loss = model.Loss(last_out, leaves, batch);
      },
      [&] { loss.backward(); });

  // One more pass for the head's memory, forward and backward together.
  DropGrads(params);
  DropGrads(head_inputs);
  loss = at::Tensor();
  meter.ResetPeak();
  const int64_t before = meter.Read().allocated_bytes;
  loss = model.Loss(last_out, leaves, batch);
  const int64_t fwd_extra = meter.Read().peak_allocated_bytes - before;
  loss.backward();
  const int64_t total_extra = meter.Read().peak_allocated_bytes - before;
  const int64_t head_param_grad_bytes = GradBytes(params);
  loss = at::Tensor();
  DropGrads(params);
  DropGrads(head_inputs);

  // The simulator holds the last output through the head's backward; a
  // head that does not keep it has freed it by then. One meter pass takes
  // the forward and the backward: the backward's peak is the pass's.
  const int64_t last_out_bytes = [&] {
    for (const Op& op : last.ops) {
      for (const TensorInfo& t : op.outputs) {
        if (t.id == last.outputs.front()) return t.bytes;
      }
    }
    return int64_t{0};
  }();
  SetOutsideBlockBytes(
      {.head_forward_peak_bytes = fwd_extra,
       .head_backward_peak_bytes = total_extra,
       .param_grad_bytes = fixed.nonblock_grad_bytes,
       .output_grad_bytes = last_out_bytes,
       .shared_input_grad_bytes = shared_grad_bytes,
       .released_output_bytes =
           HeadKeepsItsInput(model, last_out, leaves, batch) ? 0 : last_out_bytes},
      fixed);
  fixed.head_fwd_ms = embed_fwd.median_ms + loss_fwd.median_ms;
  fixed.head_bwd_ms = loss_bwd.median_ms + embed_bwd.median_ms;
  if (head_param_grad_bytes != fixed.nonblock_grad_bytes) {
    notes.push_back(Differs("parameter gradients made by the head's backward",
                            head_param_grad_bytes, fixed.nonblock_grad_bytes));
  }
}

std::unique_ptr<torch::optim::Optimizer> MakeOptimizer(
    const std::string& name, const std::vector<at::Tensor>& params) {
  if (name == "adamw") {
    return std::make_unique<torch::optim::AdamW>(
        params, torch::optim::AdamWOptions(kLearningRate));
  }
  if (name == "sgd") {
    // With momentum: one state tensor per parameter, as the graph counts.
    return std::make_unique<torch::optim::SGD>(
        params, torch::optim::SGDOptions(kLearningRate).momentum(kSgdMomentum));
  }
  return nullptr;  // "none"
}

void MeasureOptimizer(const TorchModel& model, const ModelConfig& config,
                      MemoryMeter& meter, RunTimer& timer,
                      const CpuProfileOptions& options,
                      FixedMemory& fixed, std::vector<ProfileNote>& notes) {
  std::vector<at::Tensor> params = model.Parameters();
  int64_t param_bytes = 0;
  for (const at::Tensor& p : params) param_bytes += p.nbytes();
  if (param_bytes != fixed.param_bytes) {
    notes.push_back(Differs("parameters", param_bytes, fixed.param_bytes));
  }
  std::unique_ptr<torch::optim::Optimizer> optimizer =
      MakeOptimizer(config.optimizer, params);
  if (optimizer == nullptr) {
    fixed.optimizer_ms = 0;
    fixed.optimizer_step_bytes = 0;
    return;
  }
  at::manual_seed(options.seed + 3);
  {
    c10::NoGradGuard no_grad;
    for (at::Tensor& p : params) p.mutable_grad() = at::randn_like(p) * 1e-3;
  }
  // The first step creates the state (not timed: a real run pays it once).
  const int64_t before = meter.Read().allocated_bytes;
  optimizer->step();
  const int64_t state_bytes = meter.Read().allocated_bytes - before;
  if (state_bytes != fixed.optimizer_state_bytes) {
    notes.push_back(Differs(absl::StrCat(config.optimizer, " optimizer state"),
                            state_bytes, fixed.optimizer_state_bytes));
  }
  const RunStats step = MeasureRuns(meter, timer, options, "optimizer:step",
                                    [] {}, [&] { optimizer->step(); });
  fixed.optimizer_ms = step.median_ms;
  fixed.optimizer_step_bytes =
      std::max<int64_t>(0, step.peak_extra_bytes - std::max<int64_t>(0, step.retained_bytes));
  optimizer.reset();
  DropGrads(params);
}

}  // namespace

absl::Status MeasureHeadAndOptimizer(const TorchModel& model, const Batch& batch,
                                     MemoryMeter& meter, RunTimer& timer,
                                     const CpuProfileOptions& options,
                                     Progress& progress, FixedMemory& fixed,
                                     std::vector<ProfileNote>& notes) {
  try {
    MeasureHead(model, batch, meter, timer, options, fixed, notes);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    return absl::InternalError(absl::StrCat(
        "head and loss: ", what.substr(0, what.find('\n'))));
  }
  progress.Step();
  try {
    MeasureOptimizer(model, model.config(), meter, timer, options, fixed, notes);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    return absl::InternalError(absl::StrCat(
        "optimizer step: ", what.substr(0, what.find('\n'))));
  }
  progress.Step();
  return absl::OkStatus();
}

}  // namespace sacplan::cpu_profiler_internal
