// Lowering a block's save set to a step schedule.
//
// The simulator interprets a schedule over byte counts; the executor
// interprets the same schedule over real tensors, so the two agree by
// construction. A schedule lists, for the block's forward and backward, which
// op runs (forward, recompute or backward), which activations are freed
// right after it and, in backward, which gradient buffers are made, shared
// and freed.
#ifndef SACPLAN_PLANNER_MEMORY_SCHEDULE_H_
#define SACPLAN_PLANNER_MEMORY_SCHEDULE_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "sacplan/planner/memory/block_analysis.h"

namespace sacplan {

// How a plan's save set is applied in backward.
enum class Semantics {
  // PyTorch eager selective activation checkpointing (non-reentrant
  // torch.utils.checkpoint with a selective-checkpoint policy): saved ops'
  // outputs (all of them) wait in the checkpoint's cache; in backward the
  // block re-runs, recomputing unsaved ops in forward order, until every
  // tensor autograd saved is back (early stop), and the cache and the
  // block's input live until the backward of the block's first op that
  // saved anything. A block that saves every op is not wrapped at all and
  // behaves as plain autograd. docs/memory_model.md has the rules.
  kTorchSac,
  // sacplan's executor: only tensors some backward reads are kept or
  // recomputed; each is recomputed just before the first backward op that
  // needs it and freed after its last use.
  kSacplan,
};

const char* SemanticsName(Semantics semantics);  // "torch-sac" / "sacplan"
absl::StatusOr<Semantics> ParseSemantics(const std::string& name);

// saved[op] is true when the op's outputs are kept from forward to backward.
// Collective ops are treated as saved whatever the mask says.
using SaveMask = std::vector<bool>;

// offloaded[t] is true when tensor t of the block (BlockAnalysis::tensors:
// a carried input or an op output) is kept in pinned host memory between
// forward and backward instead of on the device. Only tensors the save mask
// keeps (BlockSchedule::kept) can be; empty means none.
using OffloadMask = std::vector<bool>;

enum class StepKind { kForward, kRecompute, kBackward };

// What a backward step does with the gradient of one input of its op.
// Gradients are buffers several tensors may share (docs/memory_model.md,
// "Gradients"); LowerBlock decides each buffer's life once, and the simulator
// (over bytes) and the executor (over tensors) both follow the decision.
enum class GradKind {
  kNew,          // a new buffer holds it
  kAlias,        // it is the output's gradient buffer itself (add, clone,
                 // cat/stack slice)
  kAddInPlace,   // added into the input's live buffer, which nobody shares
  kAddToNew,     // the live buffer is shared: the sum goes to a new buffer
                 // and the input drops its reference to the old one
  kAddToShared,  // a shared input: added into the step's buffer for it
  kNewSlice,     // the op reads a slice: a slice-sized buffer, held until
                 // the slices are joined (GradJoin)
  kAliasSlice,   // a slice gradient that is a view of the output's buffer
};

struct GradInput {
  int input = 0;  // position in the op's inputs
  GradKind kind = GradKind::kNew;
  int64_t alloc_bytes = 0;    // the new buffer (kNew, kAddToNew, kNewSlice)
  // The op's fresh result while it runs, when it is added into a buffer
  // rather than becoming one (0 when it is the output's gradient itself).
  int64_t scratch_bytes = 0;
  // The new buffer's number (GradientLists::grad_buffer_bytes); -1 when
  // there is none.
  int buffer = -1;
};

// Autograd joining the gradients of a tensor's slices into one gradient of
// the whole tensor: a buffer of whole_bytes is allocated and, at that moment,
// live beside the slices; then the slice buffers listed are freed.
struct GradJoin {
  int tensor = 0;
  int64_t whole_bytes = 0;
  std::vector<int> freed_slices;  // the numbers of the buffers freed
  // A whole-tensor reader had already made a gradient of all of the tensor:
  // the joined one is added into it in place and its buffer freed.
  bool whole_was_live = false;
  int whole_buffer = -1;  // otherwise the joined buffer's number
};

// Entries [begin, end) of one of a block's gradient lists (GradientLists):
// the lists are flat, one per block, so that lowering allocates per block,
// not per step (the solver lowers blocks in its inner loop).
struct IndexRange {
  int begin = 0;
  int end = 0;
};

struct ScheduleStep {
  StepKind kind = StepKind::kForward;
  int op = 0;
  // Activation tensor indices freed after it. Inline: a step frees a few at
  // most, and the solver evaluates blocks in its inner loop, where a heap
  // allocation per step adds about half again to each evaluation.
  absl::InlinedVector<int, 4> free_after;
  // Backward steps only (kActivationGrads; the op's parameter gradients are
  // its param_bytes). Before the op: its outputs' slice gradients joined
  // (GradientLists::grad_joins). Its inputs' gradients, inputs that take
  // none not listed (GradientLists::input_grads). After the op: the tensors
  // (its outputs) whose gradient reference is dropped
  // (GradientLists::grad_drops), and the number of each buffer that frees
  // (GradientLists::grad_frees; a buffer an alias still holds is not freed).
  IndexRange grad_joins;
  IndexRange input_grads;
  IndexRange grad_drops;
  IndexRange grad_frees;
};

// One offloaded tensor's copies (docs/memory_model.md, "Offload"): to the
// host on the device-to-host copy engine in forward, back on the
// host-to-device one in backward. Step numbers index BlockSchedule's
// forward and backward lists.
struct OffloadCopy {
  int tensor = 0;
  int64_t bytes = 0;       // on the device, and over the link
  int64_t host_bytes = 0;  // pinned on the host: PinnedHostBytes(bytes)
  // The copy to the host is issued (its host buffer allocated) after this
  // forward step; -1: as the forward starts (a carried input).
  int issued_after = -1;
  // The device buffer is freed after this forward step: the first at or
  // after its last forward reader by whose end the copy is done, or the
  // forward's last step, where the block waits for its copies.
  int freed_after = 0;
  // With a spill window (CopyWindows): the device buffer outlives the
  // forward and is freed before this forward step of the next block (its
  // spill trigger when compute waits there for it); -1: freed in this
  // block's forward (freed_after).
  int freed_before_next = -1;
  // The prefetch is issued (its device buffer allocated) before this
  // backward step, late enough to hold the device memory briefly, early
  // enough to arrive before its first reader; -1: backward never reads it.
  int prefetch_before = -1;
  // Issued before the block's backward, at the next block's lead trigger
  // (CopyWindows::lead_ms); prefetch_before is then 0.
  bool led = false;
  double d2h_ms = 0;  // the copies' durations: setup, then the bytes
  double h2d_ms = 0;
  // When each copy runs on its engine: to the host, from the block's
  // forward start; back, from its backward start (waits included). Back:
  // 0 and 0 when never fetched.
  double to_host_start_ms = 0;
  double to_host_end_ms = 0;
  double to_device_start_ms = 0;
  double to_device_end_ms = 0;
};

struct BlockCopies {
  std::vector<OffloadCopy> copies;  // in the order they go to the host
  // Compute waiting for a copy: at the forward's end, until every copy to
  // the host is done (a block's copies never outlive its forward), and
  // before each backward step (one entry per step, or empty), until the
  // prefetches it reads have arrived.
  double forward_wait_ms = 0;
  std::vector<double> backward_wait_ms;
  // With a spill window (CopyWindows): the next block's forward step
  // before which compute waits, spill_wait_ms, until every copy to the host
  // is done (forward_wait_ms is then 0); -1: the block's own forward end.
  int spill_trigger = -1;
  double spill_wait_ms = 0;
  // With a lead: the op of the next block before whose backward step the
  // led copies back are issued; -1: none led.
  int lead_trigger_op = -1;
  // The host's time to send and fetch the copies (HostLink's
  // offload_host_us + fetch_host_us per copy), counted as exposed.
  double host_issue_ms = 0;
  double exposed_ms = 0;      // the sum of the waits and host_issue_ms
  int64_t host_bytes = 0;     // the copies' pinned host bytes
};

// A block's backward gradient lists. Whatever the save set, the backward
// runs every op's backward once in reverse op order (recomputes, between
// them, touch no gradient), so these depend on the block alone:
// AnalyzeBlock lowers them once (BlockAnalysis::gradients) and every
// schedule of the block takes a copy.
struct GradientLists {
  // The backward steps' lists (ScheduleStep's ranges index them).
  std::vector<GradJoin> grad_joins;
  std::vector<GradInput> input_grads;
  std::vector<int> grad_drops;
  std::vector<int> grad_frees;
  // The bytes of each gradient buffer of the backward, by number: first
  // the buffers the block outputs' gradients arrive in (the block after, or
  // the head, allocated them; output_grad_buffers), then each new buffer in
  // the order the backward allocates it.
  std::vector<int64_t> grad_buffer_bytes;
  // Per stream: the buffer its output's gradient arrives in, one of the
  // first arriving_buffers. Streams the block after hands views of one
  // buffer share it (BlockAnalysis::output_grads); otherwise stream s's is
  // buffer s.
  std::vector<int> output_grad_buffers;
  int arriving_buffers = 0;
  // Per stream: the buffer holding the carried input's gradient after the
  // backward, which the block before frees; -1 when it takes none. Streams
  // may name one buffer (a cat of the carried inputs): it is freed once.
  std::vector<int> carried_grad_buffers;
  // After the last backward step: the carried inputs' slice gradients
  // joined (at most one entry of grad_joins per stream). The block outputs'
  // gradients are live when the backward starts; the carried inputs' are
  // left live for the block before.
  IndexRange final_grad_joins;
};

struct BlockSchedule {
  // Per tensor: held from forward to backward. A carried input is kept
  // unless the block frees it in forward (a torch-sac block that autograd
  // runs plainly and whose backward does not read it). The block outputs
  // are never marked: the next block (or the head) holds them.
  std::vector<bool> kept;
  std::vector<int> free_at_backward_start;  // kept tensors backward never reads
  // A forward step's free_after may name a carried input (category kept:
  // the block before allocated it); a backward step's may name a block
  // output its stream's holds_output entry is set for.
  std::vector<ScheduleStep> forward;
  std::vector<ScheduleStep> backward;  // recompute and backward steps
  int recomputed_ops = 0;
  double recompute_ms = 0;
  // Per stream (BlockAnalysis::outputs' order). torch-sac, checkpointed:
  // the block output's producer is saved, so the checkpoint cache keeps the
  // output's storage alive into this block's backward, past the next
  // block's (typically the re-run stops before the final residual add, and
  // the storage lives until the frame dies). This block frees it (listed in
  // a backward step's free_after); whoever else would free that storage
  // (the next block as its carried input, or the head) must not.
  std::vector<bool> holds_output;
  // torch-sac: the outputs of autocast-cached ops (Op::autocast_cached)
  // that the forward does not keep for backward. Autocast's cast cache
  // holds them until the step's autocast region ends, after the head's
  // forward, so no forward step frees them: the step does, then
  // (BlockInterpreter::EndAutocastRegion). Empty under sacplan semantics,
  // whose executor runs without autocast.
  std::vector<int> autocast_held;
  // torch-sac: the block runs under checkpoint (SaveOutcome::checkpointed).
  // Per op, saved (collectives always). The two timelines price its steps
  // by them (docs/memory_model.md, "Two timelines").
  bool checkpointed = false;
  std::vector<bool> saved;
  // The backward's gradient lists, which the block alone decides.
  GradientLists grads;
  // The offloaded tensors' copies; empty without offload. A step's free of
  // an offloaded tensor frees its prefetched buffer (if any) and its host
  // copy.
  BlockCopies offload;
};

// The entries of `list` in `range`.
template <typename T>
std::span<const T> Entries(const std::vector<T>& list, IndexRange range) {
  return std::span<const T>(list).subspan(range.begin, range.end - range.begin);
}

// What a save mask keeps and recomputes, by the rules LowerBlock applies,
// without building the schedule: cheap enough to screen many masks.
struct SaveOutcome {
  std::vector<bool> kept;  // per tensor, as BlockSchedule::kept
  // Bytes held after forward: the kept tensors, and the block outputs the
  // block holds (as EvaluateBlock counts them).
  int64_t kept_bytes = 0;
  double recompute_ms = 0;
  // torch-sac with something unsaved: the block runs under checkpoint, and
  // every unsaved op before the re-run's stop is recomputed. Otherwise only
  // the unsaved producers of what backward reads are recomputed.
  bool checkpointed = false;
  std::vector<bool> holds_output;  // per stream, as BlockSchedule::holds_output
};
// Whether `saved` keeps every op of the block (collectives always count as
// saved): such a block is not checkpointed at all under either semantics.
bool EveryOpSaved(const BlockAnalysis& block, const SaveMask& saved);
// The same rule as a list, a plan's recompute list and the checkpoint
// flag's one meaning (docs/plan_format.md): the ops a block does not save,
// collectives aside, in block order. A block runs under checkpoint exactly
// when there is one (EveryOpSaved is false); PyTorch's re-run recomputes
// them all (under sacplan semantics RecomputedOps says which backward
// needs).
std::vector<int> UnsavedOps(const BlockAnalysis& block, const SaveMask& saved);

// Random ops (docs/memory_model.md, "Random ops"). PyTorch's checkpoint
// replays the generator from the block's start and a cached op draws
// nothing, so a recomputed random op draws the forward's numbers only when
// every random op before it is recomputed too: in a checkpointed block the
// unsaved random ops must come before the saved ones. (Whether the re-run
// reaches an op is not asked: apply_plan checks the rule as the forward
// runs, before the re-run's stop is known.) sacplan semantics never
// recomputes a random op (DecideSaves keeps it, like a collective), so any
// mask is safe there. Returns the first unsaved random op after a saved
// one, or -1 when `saved` replays the forward's numbers.
int FirstMisreplayedRandomOp(const BlockAnalysis& block, const SaveMask& saved);

// `saved` with every random op before the last unsaved one unsaved too: the
// nearest mask (saving less, recomputing more) that replays the numbers.
SaveMask ReplayRandomOps(const BlockAnalysis& block, SaveMask saved);

SaveOutcome DecideSaves(const BlockAnalysis& block, const SaveMask& saved,
                        Semantics semantics);
// The ops sacplan semantics recomputes for `saved` (plain autograd's too,
// for a block saving every op), last op first: their fwd_ms summed in this
// order is RecomputeMs in those semantics. Depends only on the graph and
// `saved`, so blocks of one memory structure share it.
std::vector<int> RecomputedOps(const BlockAnalysis& block, const SaveMask& saved);
// DecideSaves(block, saved, semantics).recompute_ms, without the rest.
double RecomputeMs(const BlockAnalysis& block, const SaveMask& saved,
                   Semantics semantics);

// torch-sac: whether the backward re-run of a checkpointed block reaches op
// `op` (recomputes it when unsaved, pops its cached outputs when saved): the
// ops before the block's last saving op (BlockAnalysis::last_saving_op),
// and that op itself when its backward reads one of its own outputs. The
// re-run stops there (PyTorch's early stop).
bool TorchSacRerunReaches(const BlockAnalysis& block, int op);

// torch-sac: the time (ms) checkpointing adds to a block that is
// checkpointed with `saved`: every op's forward runs under the
// selective-checkpoint policy, its backward unpacks through checkpoint's
// hooks, and the re-run recomputes the unsaved ops it reaches and pops the
// saved ones from the cache (OpNode's torch-sac costs).
// With no measured costs in the profile: the forward time of the ops the
// re-run recomputes.
double TorchSacCheckpointMs(const BlockAnalysis& block, const SaveMask& saved);

// Lowers a save mask (one entry per op) to the block's schedule.
BlockSchedule LowerBlock(const BlockAnalysis& block, const SaveMask& saved,
                         Semantics semantics);

// The same with the tensors `offloaded` marks (an empty mask: none) kept in
// host memory, their copies timed from the ops' times and `link`'s
// bandwidths (which must be > 0 when anything is offloaded). Marked
// tensors the schedule does not keep, and carried inputs the block before
// holds as its output, stay as they are.
BlockSchedule LowerBlock(const BlockAnalysis& block, const SaveMask& saved,
                         Semantics semantics, const OffloadMask& offloaded,
                         const HostLink& link);

// Whether a block's copies back lead into the next block's backward: as
// its times decide (planning), or as a plan records it (replaying the
// plan: BlockPlan::lead, which sacplan_torch acts on): then under
// torch-sac every copy leads, or none does.
enum class Lead { kByTimes, kRecorded, kNone };

// The ops of a block where the block before's copy windows end: its spill
// trigger (the block before's copies to the host are done before it, and
// the block's own start from it) and its lead trigger (the block before's
// led copies back are issued before its backward step, and the block's
// own are back by then); -1: none.
struct BlockTriggers {
  int spill_op = -1;
  int lead_op = -1;

  bool operator==(const BlockTriggers&) const = default;
};

// How a plan file replays its copies (CopyReplayOfPlan): per block, its
// triggers and whether its copies back lead. Empty: as the times decide.
struct CopyReplay {
  std::vector<BlockTriggers> triggers;
  std::vector<Lead> leads;
};

// Offload's windows beyond a block's own forward and backward
// (docs/memory_model.md, "Offload"), fixed by the blocks around it (their
// times, or the triggers a plan records: CopyReplay). Defaults: none, a
// block's copies live inside its own forward and backward.
struct CopyWindows {
  // Spill: the ends of the next block's forward steps before its spill
  // trigger op, from the next block's forward start (ms, one per step).
  // Copies to the host may run on until the trigger; the last entry is the
  // window's length. Empty: no spill.
  std::vector<double> spill_step_end_ms;
  // The block's copies to the host start no earlier than this, from its
  // forward start: the block before spills this long into its forward.
  double d2h_from_ms = 0;
  // Lead: copies back may start this long before the block's backward
  // starts (the next block's backward time from its lead trigger op's
  // backward to its end, recomputes aside), issued before that op's
  // backward step. 0 and -1: no lead.
  double lead_ms = 0;
  int lead_trigger_op = -1;
  // The plan records the lead (Lead::kRecorded).
  bool lead_recorded = false;
  // The op before whose backward step every copy back of this block has
  // arrived: where the block before's lead starts. -1: none.
  int h2d_deadline_op = -1;

  bool operator==(const CopyWindows&) const = default;
};

// How far a block's copies reach into its neighbours: the next block's
// forward up to the first op that starts at kSpillFraction of it, and the
// next block's backward from the op whose backward and those after it
// take kLeadFraction of it (docs/memory_model.md, "Offload").
inline constexpr double kSpillFraction = 0.5;
inline constexpr double kLeadFraction = 0.5;

// The windows of block `b` of `blocks` (AnalyzeBlock's, in step order),
// the same under both semantics: sacplan_torch acts at the same ops
// (docs/python.md, "Offload"). The last block neither spills nor leads;
// the first keeps to the windows of a block before it, as the others do.
// With `replay` (a plan's), its triggers and lead choices instead of the
// times'.
CopyWindows WindowsOf(const std::vector<BlockAnalysis>& blocks, int b,
                      const CopyReplay& replay = {});
// The op of `block` before whose forward the block before's spill ends,
// and the op before whose backward step its lead starts; -1: none.
int SpillTriggerOp(const BlockAnalysis& block, double spill_fraction = kSpillFraction);
int LeadTriggerOp(const BlockAnalysis& block, double lead_fraction = kLeadFraction);
// Both, by the block's times.
BlockTriggers TriggersOf(const BlockAnalysis& block);

// The index in `schedule.backward` of op `op`'s backward step; -1 for
// op -1.
int BackwardStepOf(const BlockSchedule& schedule, int op);

// LowerBlock with offload, its copies also using `windows`.
BlockSchedule LowerBlock(const BlockAnalysis& block, const SaveMask& saved,
                         Semantics semantics, const OffloadMask& offloaded,
                         const HostLink& link, const CopyWindows& windows);

// What a backward step reads: a recompute its op's inputs, an op's
// backward what that backward needs (tensor indices).
const std::vector<int>& StepReads(const BlockAnalysis& block, const ScheduleStep& step);

// Whether tensor `t` may be offloaded at all, whatever the plan: a carried
// input or the output of an op that is not a collective (collectives stay
// saved on the device, as their outputs feed the ranks' next collective).
bool Offloadable(const BlockAnalysis& block, int t);

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_MEMORY_SCHEDULE_H_
