// The measured CPU profiler: runs a model's LibTorch ops on this machine's
// CPU and writes what it measured into the same profile.json the roofline
// writes (source "cpu", device "cpu").
//
// What is measured (docs/profile_format.md, "Measured profiles"):
// - every op of block 0 (all blocks share one structure; the others get
//   copies), alone: forward (TorchOp::Forward, grad mode off, as the
//   executor runs it and recomputes it) and backward (TorchOp::Backward
//   given only the tensors the graph's backward_needs names, and random
//   output gradients), each `repeats` runs after `warmup` runs, for the
//   workspaces below;
// - with options.whole_step_pass set (orchestration's
//   MeasureCpuProfileWithWholeSteps sets it; the profiler does not link the
//   executor that runs training steps): whole training steps of the model
//   under the `none` plan, max(1, warmup) untimed and then 2 * repeats alternating
//   between timing every op and timing the step alone: every op's fwd_ms
//   and bwd_ms is its median time inside those steps (cold caches, a
//   fragmented heap), and fixed.step_overhead_ms what the median step timed
//   alone spends beyond the ops, the head and the optimizer;
// - embedding_saved_bytes: what the embeddings' autograd graph holds;
// - workspace_bytes: the most bytes allocated during Forward beyond what was
//   held before it and its outputs; bwd_workspace_bytes: the same during
//   Backward beyond the gradients it returns (both clamped at 0), from the
//   counting CPU allocator (so scratch that MKL or oneDNN take from malloc
//   themselves is not seen);
// - the head: Embed + Loss forward and their backward (head_fwd_ms,
//   head_bwd_ms) and head_bytes, the most bytes the head holds beyond what
//   the simulator already counts in that phase (the last block output, its
//   gradient, the shared inputs' gradients and the head's parameter
//   gradients);
// - the optimizer step (AdamW or SGD with momentum, per config.optimizer)
//   over the real parameters with gradients present, after a first step has
//   created its state: optimizer_ms and optimizer_step_bytes.
// Sizes (output bytes, parameter gradient bytes) must equal the graph's: the
// graph is the contract, and a mismatch is an error naming the op.
#ifndef SACPLAN_PROFILER_CPU_PROFILER_H_
#define SACPLAN_PROFILER_CPU_PROFILER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sacplan/metering/memory_meter.h"
#include "sacplan/models/model_config.h"
#include "sacplan/models/torch_model.h"
#include "sacplan/planner/plan_io/profile.h"
#include "sacplan/profiler/profile_note.h"
#include "sacplan/profiler/run_timer.h"

namespace sacplan {

struct CpuProfileOptions {
  int warmup = 2;    // runs per measurement before timing starts (>= 0)
  int repeats = 5;   // timed runs; the median is reported (>= 1)
  uint64_t seed = 0; // parameters, batch and random gradients
  // ATen intra-op threads while measuring; 0 keeps LibTorch's default (one
  // per physical core). at::set_num_threads is process-wide: the previous
  // count is restored when MeasureCpuProfile returns. On a machine shared
  // with other work, 1 gives steadier times: a parallel region waits for its
  // slowest thread, and a descheduled one costs a whole time slice.
  int threads = 0;
  // The clock every time is read from. kProcessCpu with threads = 1 gives
  // times that a busy machine does not inflate; compare them with a
  // training step's CPU time (StepRecord::cpu_ms).
  HostClock clock = HostClock::kWall;
  // Called with (0, total) once the model is built, then after each measured
  // unit (an op's forward or backward, the head, the optimizer) with the
  // units done; may be empty.
  std::function<void(int done, int total)> progress;
  // On the CPU, after the ops are measured: replaces block op times with
  // their times inside real training steps and sets fixed.step_overhead_ms
  // (orchestration/whole_step.h); may add notes. Empty: the ops keep their
  // times alone and the overhead stays 0.
  std::function<absl::Status(const TorchModel& model, MemoryMeter& meter,
                             const CpuProfileOptions& options, Model& measured,
                             std::vector<ProfileNote>& notes)>
      whole_step_pass;
};

struct CpuProfileResult {
  Profile profile;
  std::vector<ProfileNote> notes;
  int threads = 0;  // ATen intra-op threads used (LibTorch's default)
};

// Builds the TorchModel for `config` on the CPU and measures it as above.
// InvalidArgument for a bad config or options; FailedPrecondition when the
// counting allocator cannot be installed; Internal when the model's ops do
// not match its graph (sizes) or LibTorch throws (message names the op).
absl::StatusOr<CpuProfileResult> MeasureCpuProfile(
    const ModelConfig& config, const CpuProfileOptions& options = {});

}  // namespace sacplan

#endif  // SACPLAN_PROFILER_CPU_PROFILER_H_
