// An index-based view of one Block, built once and shared by schedule
// lowering, the simulator and the solver so that none of them does string
// lookups in inner loops.
#ifndef SACPLAN_PLANNER_MEMORY_BLOCK_ANALYSIS_H_
#define SACPLAN_PLANNER_MEMORY_BLOCK_ANALYSIS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sacplan/planner/ir/graph.h"

namespace sacplan {

struct TensorNode {
  std::string id;
  int64_t bytes = 0;
  bool requires_grad = true;
  int producer = -1;             // op index; -1 for block inputs
  bool carried_input = false;    // a stream's input (Block::inputs, kCarried)
  bool shared_input = false;     // step-level input, never freed by a block
  bool block_output = false;     // handed to the next block (Block::outputs)
  int stream = -1;               // carried inputs and block outputs: the stream
  bool needed_by_backward = false;  // some op's backward reads it
  std::vector<int> consumers;    // op indices reading it in forward, ascending
  // The op after which the block's code lets go of it (TensorInfo::
  // held_until); -1: none given.
  int held_until = -1;
};

struct OpNode {
  std::vector<int> inputs;          // tensor indices
  // Per input (same order): the bytes of the gradient the op's backward
  // makes for it; less than the tensor's bytes when the op reads a slice
  // (Op::input_grad_bytes).
  std::vector<int64_t> input_grad_bytes;
  std::vector<int> outputs;         // tensor indices
  std::vector<int> backward_needs;  // tensor indices
  double fwd_ms = 0;
  double bwd_ms = 0;
  // torch-sac costs (Op::checkpointed_fwd_ms, saved_fwd_ms,
  // checkpointed_bwd_ms, recompute_ms, replay_ms), absent ones resolved:
  // what the op's forward costs inside checkpoint beyond fwd_ms, unsaved and
  // saved (0 when absent; saved at least unsaved), what its backward costs
  // there beyond bwd_ms (0 when absent), its re-run recomputed (fwd_ms when
  // absent) and saved (0 when absent).
  double checkpointed_fwd_extra_ms = 0;
  double saved_fwd_extra_ms = 0;
  double checkpointed_bwd_extra_ms = 0;
  double recompute_ms = 0;
  double replay_ms = 0;
  // Host times of its steps, defaults resolved (Op::host), and whether the
  // host waits for the device after issuing it (Op::syncs).
  ResolvedHostTimes host;
  bool syncs = false;
  int64_t workspace_bytes = 0;
  int64_t bwd_workspace_bytes = 0;
  int64_t param_bytes = 0;
  int64_t output_bytes = 0;  // sum over outputs
  bool collective = false;
  bool never_save = false;  // see Op::never_save
  bool random = false;      // see Op::random
  bool autocast_cached = false;  // see Op::autocast_cached
  // Kind "add" or "clone": backward hands the output's gradient to each
  // input of the same size without allocating (autograd's AddBackward,
  // CloneBackward). Several outputs are parts of one storage, each a stream
  // the block returns as a view (sacplan_torch's boundary.py): autograd
  // joins their gradients into one of the whole first (the views'
  // backward), and hands that on.
  bool passes_grad_through = false;
  // Kind "cat" or "stack": backward hands each input a view of its slice of
  // the output's gradient (autograd's CatBackward, StackBackward), so the
  // inputs' gradients share the output's buffer whatever their sizes.
  bool splits_grad = false;
};

struct BlockGradients;  // internal to the planner (src/grad_schedule.h)

// How the gradients of a block's outputs arrive from the block after.
// The block after's backward may hand several streams views of one buffer
// (a cat of its carried inputs: autograd's CatBackward narrows its output's
// gradient), which lives until the last view lets go and whose bytes are
// the cat output's, not the streams'.
struct ArrivingGradients {
  // Per stream, the number of the buffer its gradient is a view of,
  // numbered 0 on in the order the streams first name them.
  std::vector<int> buffer_of_stream;
  std::vector<int64_t> buffer_bytes;  // per buffer

  bool operator==(const ArrivingGradients&) const = default;
};

struct BlockAnalysis {
  std::vector<TensorNode> tensors;  // block inputs first, then op outputs
  std::vector<OpNode> ops;          // same order as Block::ops
  std::vector<std::string> op_ids;
  // Tensor indices per stream (Block::inputs' carried ones, Block::outputs):
  // stream s's input and output; as many of each.
  std::vector<int> carried_inputs;
  std::vector<int> outputs;
  int64_t param_bytes = 0;          // sum of op param_bytes
  double fwd_ms = 0;                // sum of op forward times
  double bwd_ms = 0;                // sum of op backward times
  // Some op has a host time or syncs: its steps' host timeline may pace
  // the device (docs/memory_model.md, "Two timelines").
  bool has_host_times = false;
  // The first and the last op (in forward order) whose backward reads
  // something, -1 when no op's does. Under PyTorch's non-reentrant
  // checkpoint these bound a checkpointed block's backward: the re-run stops
  // at the last (early stop), and the checkpoint frame (its cache and its
  // saved inputs) dies after the first one's backward (docs/memory_model.md).
  int first_saving_op = -1;
  int last_saving_op = -1;
  // The last saving op's backward reads one of its own outputs. Autograd
  // saves an op's inputs before the op runs and its outputs after, so the
  // re-run computes the last saving op only in this case.
  bool last_saving_op_reads_output = false;
  // Empty: each output's gradient arrives in a buffer of its own, of the
  // output's bytes, as the head hands them. AnalyzeModel sets it where the
  // block after hands them on otherwise (LinkBlockGradients).
  ArrivingGradients output_grads;
  // The gradient part of every schedule of the block, which no save set
  // changes: lowered once here rather than per save set. Null in an
  // analysis not made by AnalyzeBlock (LowerBlock then lowers it itself).
  std::shared_ptr<const BlockGradients> gradients;

  int op_count() const { return static_cast<int>(ops.size()); }
  // Op index for an id, or -1.
  int FindOp(const std::string& id) const;
};

// Builds the view. The block must already pass ValidateBlock; errors found
// here (an output the block's own backward needs) come back as
// InvalidArgument.
absl::StatusOr<BlockAnalysis> AnalyzeBlock(const Block& block);

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_MEMORY_BLOCK_ANALYSIS_H_
