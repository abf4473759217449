// The op-graph IR the planner reasons about: tensors, ops, blocks and a model.
//
// A block is a DAG of ops listed in a valid execution (topological) order.
// Tensors are identified by string ids unique within a block; an op refers to
// its inputs and outputs by id. Ids and order are what plans and the executor
// agree on, so they are part of the contract (docs/profile_format.md).
//
// All sizes are bytes, all times milliseconds. Nothing here allocates on a
// device; this header has no LibTorch or CUDA dependency.
#ifndef SACPLAN_PLANNER_IR_GRAPH_H_
#define SACPLAN_PLANNER_IR_GRAPH_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "sacplan/planner/ir/host_times.h"
#include "sacplan/planner/ir/parallel.h"

namespace sacplan {

// Where a block input comes from.
enum class InputKind {
  // A stream: produced by the previous block (or the embedding), consumed
  // by this one. Checkpointing keeps it as a saved input of the block. Most
  // blocks carry one (the residual stream); double-stream blocks (Flux, SD3,
  // HunyuanVideo) carry two, image and text tokens, each changed per block.
  kCarried,
  // Produced once per step outside the blocks and read by every block
  // (text context, timestep modulation, RoPE tables). Accounted once per step.
  kShared,
};

struct TensorInfo {
  std::string id;
  std::vector<int64_t> shape;
  std::string dtype;        // "bfloat16", "float32", ... (informational)
  int64_t bytes = 0;        // storage size; > 0
  bool requires_grad = true;  // false for non-differentiable outputs (stats)
  // Op outputs only, optional: the id of an op of the same block after which
  // the block's own (Python) code lets go of this tensor, when that is later
  // than its last reader (a local variable still names it). Empty: freed
  // after its last reader. torch-sac only (docs/memory_model.md, "Tensors
  // the block's code holds").
  std::string held_until;
};

struct BlockInput {
  TensorInfo tensor;
  InputKind kind = InputKind::kCarried;
};

struct Op {
  std::string id;    // stable name, e.g. "self_attn.q" or "ffn.0"
  std::string kind;  // a row of op_kinds.inc ("linear", "attention", ...) or an aten name
  bool has_bias = false;            // a biased linear dispatches as addmm
  std::vector<std::string> inputs;  // tensor ids (block inputs or op outputs)
  std::vector<TensorInfo> outputs;  // produced tensors; at least one
  // Tensors (among inputs and outputs) that this op's backward reads.
  std::vector<std::string> backward_needs;
  double flops = 0;             // forward FLOPs
  double bytes_moved = 0;       // forward memory traffic
  double fwd_ms = 0;            // forward time; recompute costs the same
  double bwd_ms = 0;            // backward time
  // Measured costs under PyTorch's selective checkpointing, policy calls
  // included (sacplan_torch's capture; torch-sac semantics only): the op's
  // forward inside a checkpointed block when unsaved and when saved (the
  // policy also caches its outputs), its backward inside a checkpointed
  // block (checkpoint's saved-tensor hooks unpack what it reads), its
  // backward re-run when recomputed, and when saved (its output popped from
  // the cache). Absent: an ideal checkpoint (fwd_ms, fwd_ms, bwd_ms,
  // fwd_ms, 0).
  std::optional<double> checkpointed_fwd_ms;
  std::optional<double> saved_fwd_ms;
  std::optional<double> checkpointed_bwd_ms;
  std::optional<double> recompute_ms;
  std::optional<double> replay_ms;
  int64_t workspace_bytes = 0;      // scratch held only while forward runs
  int64_t bwd_workspace_bytes = 0;  // scratch held only while backward runs
  int64_t param_bytes = 0;  // gradient bytes this op's backward allocates
  bool collective = false;  // never recomputed: re-issuing can deadlock ranks
  // Never saved in a checkpointed block: a later call writes its output in
  // place, and PyTorch's selective checkpointing refuses a cached tensor
  // that changed. (Saving every op of a block, which is no checkpoint, is
  // still allowed.) Set by sacplan_torch's capture.
  bool never_save = false;
  // Draws from a random number generator (dropout, torch.rand, ...): a
  // recompute gets the forward's numbers only if it draws the same ones in
  // the same order (docs/memory_model.md, "Random ops"). Set by
  // sacplan_torch's capture.
  bool random = false;
  // A low-precision cast of an fp32 weight that torch.autocast caches (its
  // cache on): the cache keeps the output until the autocast region ends,
  // past the op's last reader, under torch-sac semantics
  // (docs/memory_model.md, "Autocast's weight casts"). Set by
  // sacplan_torch's capture.
  bool autocast_cached = false;
  // Gradient bytes this op's backward makes for an input it reads only part
  // of (a slice of a fused tensor, e.g. q, k, v and the MLP input cut from
  // one linear's output), keyed by input id; inputs read whole are absent.
  // Autograd makes the slice-sized gradient and joins the slices into the
  // whole tensor's gradient just before the producer's backward. Set by
  // sacplan_torch's capture; each value is in (0, the input's bytes).
  std::map<std::string, int64_t> input_grad_bytes;
  // Host (issuing thread) time of each of the op's steps; all absent: 0,
  // host and device on one clock (docs/memory_model.md, "Two timelines").
  OpHostTimes host;
  // After issuing the op the host waits for the device to finish it
  // (.item(), nonzero, a copy into pageable memory, a synchronize).
  bool syncs = false;
};

struct Block {
  int index = 0;
  // At least one kCarried input; the carried inputs, in their order here,
  // are the block's streams 0, 1, ...
  std::vector<BlockInput> inputs;
  std::vector<Op> ops;  // topological order
  // Ids of the op outputs handed to the next block, one per stream: the
  // output of stream s is the next block's s-th carried input (and the
  // head's s-th input after the last block). Distinct; never read by the
  // block's own backward.
  std::vector<std::string> outputs;
  BlockFsdp fsdp;  // all zero unless the model's parallel.fsdp
};

// Memory that does not depend on the checkpointing plan.
struct FixedMemory {
  int64_t param_bytes = 0;            // all parameters, resident all step
  int64_t optimizer_state_bytes = 0;  // e.g. fp32 Adam m and v
  // Gradients of the head's parameters (final norm, output projection,
  // lm_head); allocated in the head's backward. Block parameter gradients
  // come from Op::param_bytes.
  int64_t nonblock_grad_bytes = 0;
  // Gradients of the embeddings' parameters (patch, text and time
  // embeddings; the token table): the embeddings' backward allocates them
  // after every block's backward, so they are not live at the blocks' peak.
  int64_t embedding_grad_bytes = 0;
  // Activations the non-block parts that run before block 0 (patch, text
  // and time embeddings, the noised latents, the loss target) hold for their
  // backward: live from before block 0's forward until the embeddings'
  // backward has run, after every block's backward.
  int64_t embedding_saved_bytes = 0;
  // What the parts before block 0 hold only until the forward ends, not
  // into the backward: autocast's cached casts of their weights (a text
  // embedding's Linear(4096, d) weight in bf16), freed when the step's
  // autocast region exits, after the head's forward.
  int64_t embedding_fwd_only_bytes = 0;
  // Scratch the embeddings' backward takes and frees before it returns (a
  // patch-embedding convolution's weight-gradient workspace under
  // autocast): live only at that moment, after every block's backward.
  int64_t embedding_bwd_workspace_bytes = 0;
  // Extra bytes held during the loss/head (logits, loss buffers) on top of the
  // last block's output.
  int64_t head_bytes = 0;
  // The part of head_bytes the head holds only in its forward (a loss's
  // forward buffers that its backward frees before the gradients arrive);
  // 0 <= head_fwd_only_bytes <= head_bytes. The rest is held through the
  // head's backward, beside the gradients.
  int64_t head_fwd_only_bytes = 0;
  // The part of head_bytes the head holds only in its backward (a loss
  // whose backward makes buffers larger than its forward's); 0 <=
  // head_bwd_only_bytes and head_fwd_only_bytes + head_bwd_only_bytes <=
  // head_bytes. The head's forward moment holds head_bytes less it. It
  // matters where the forward holds what its backward does not: autocast's
  // weight casts, live until the forward ends.
  int64_t head_bwd_only_bytes = 0;
  int64_t optimizer_step_bytes = 0;  // scratch of the optimizer step
  // FSDP only: the root module's parameters (embeddings, head) unsharded.
  // FSDP2 gathers them before block 0 and, the root being exempt from
  // reshard_after_forward, keeps them until the end of backward.
  int64_t fsdp_root_param_bytes = 0;
  double head_fwd_ms = 0;    // embeddings + head + loss forward
  double head_bwd_ms = 0;    // their backward
  double optimizer_ms = 0;   // optimizer step
  // What a real step spends beyond its timed parts (the blocks' ops, the
  // head, the optimizer): autograd's engine, the allocator, dispatch, ms.
  // Measured profiles time it in whole steps; 0 elsewhere.
  double step_overhead_ms = 0;
  // Host time of the head's forward and backward and the optimizer step
  // (0: host and device on one clock).
  FixedHostTimes host;
};

// The device's link to pinned host memory, over which a plan may offload
// kept activations (docs/memory_model.md, "Offload"). Copies in each
// direction run on their own copy engine, one after another, beside compute.
struct HostLink {
  double d2h_gbps = 0;  // device to pinned host, GB/s (1e9 bytes/s)
  double h2d_gbps = 0;  // pinned host to device, GB/s
  // Host memory available to this device when the profile was taken
  // (MemAvailable divided among the node's GPUs); 0 when unknown.
  int64_t host_memory_bytes = 0;
  // Per-copy costs, microseconds (0: copies priced by their bytes alone).
  double offload_host_us = 0;  // host time to send one tensor to the host
  double fetch_host_us = 0;    // host time to fetch one tensor back
  double copy_setup_us = 0;    // a copy engine's fixed time per copy
  // Both directions copy: without a link nothing can be offloaded.
  bool available() const { return d2h_gbps > 0 && h2d_gbps > 0; }
  // Milliseconds to copy `bytes` at `gbps` GB/s.
  static double CopyMs(int64_t bytes, double gbps) {
    return static_cast<double>(bytes) / (gbps * 1e6);
  }
  // What ToHostMs and ToDeviceMs add per copy, from one copy of `bytes` at
  // `gbps` measured to take `copy_ms`: copy_setup_us (0 when the bytes
  // alone take longer).
  static double CopySetupUs(double copy_ms, int64_t bytes, double gbps) {
    return std::max(0.0, copy_ms - CopyMs(bytes, gbps)) * 1e3;
  }
  // One copy's time on its engine, setup included, each way (ms).
  double ToHostMs(int64_t bytes) const { return copy_setup_us * 1e-3 + CopyMs(bytes, d2h_gbps); }
  double ToDeviceMs(int64_t bytes) const {
    return copy_setup_us * 1e-3 + CopyMs(bytes, h2d_gbps);
  }
  // The host's time per offloaded tensor, sent and fetched back (ms).
  double HostMsPerTensor() const { return (offload_host_us + fetch_host_us) * 1e-3; }
};

struct Model {
  std::vector<Block> blocks;
  FixedMemory fixed;
  ParallelConfig parallel;  // the rank's job; default: a single rank
  HostLink host_link;       // none (all zero) unless the profile has one
};

// Checks the structural invariants every consumer relies on: unique ids,
// inputs defined before use, positive sizes, backward needs among the op's
// own tensors, at least one carried input and one output per carried input,
// each produced by an op and listed once. A cycle shows up as
// an input used before it is produced. Returns InvalidArgument naming the
// block, op and field at fault.
absl::Status ValidateBlock(const Block& block);

// The most bytes all of a model's byte counts may add up to (2^62): any sum
// the simulator and the solver form over a step then fits int64 with room
// to spare, so they need no overflow checks of their own.
inline constexpr int64_t kMaxModelTotalBytes = int64_t{1} << 62;

// ValidateBlock for every block, blocks that connect, the parallel config
// and each block's FSDP fields (parallel.h), fixed memory and
// times that are >= 0 and finite, and byte counts (tensors, workspaces,
// parameters, fixed memory) whose sum is at most kMaxModelTotalBytes.
absl::Status ValidateModel(const Model& model);

// What makes two ops the same op of a graph, in order: the id, the kind
// (which decides how the backward hands gradients on), the input ids, "->",
// the output ids and, for an op that draws random numbers, a mark.
// GraphFingerprint hashes exactly these, and SameStructure compares them
// before the costs.
std::vector<std::string_view> OpIdentity(const Op& op);

// True when the two blocks have the same ops (OpIdentity), tensors and costs
// (their index aside), so that planning work done for one holds for the other.
bool SameStructure(const Block& a, const Block& b);

// SameStructure without the times: the blocks allocate and free the same
// bytes in the same order under any save mask, so their simulated memory is
// the same and only their recompute time can differ. Blocks of a captured
// model, timed one by one, are typically like this.
bool SameMemoryStructure(const Block& a, const Block& b);

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_IR_GRAPH_H_
