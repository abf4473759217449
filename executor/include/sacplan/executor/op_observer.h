// What the plan executor tells an observer about each block op it runs, so
// that a profiler can time ops inside a real training step (where caches
// are cold and the allocator is fragmented, unlike an op timed alone).
#ifndef SACPLAN_EXECUTOR_OP_OBSERVER_H_
#define SACPLAN_EXECUTOR_OP_OBSERVER_H_

#include <functional>

#include "sacplan/planner/memory/schedule.h"

namespace sacplan {

struct OpTiming {
  int block = 0;  // block index
  int op = 0;     // op index within the block
  StepKind kind = StepKind::kForward;  // forward, recompute or backward
  // Wall time of the op's Forward or Backward call with the executor's
  // bookkeeping around it (gathering inputs, accumulating gradients), ms.
  double ms = 0;
  // The same span in the process's CPU time (ProcessCpuMs), ms.
  double cpu_ms = 0;
};

// The process's CPU time (CLOCK_PROCESS_CPUTIME_ID), ms since an arbitrary
// origin: with one ATen thread, what a step costs without the time it waits
// while other work holds the cores.
double ProcessCpuMs();

// Called on the thread running the step, once per op run; must not throw.
using OpObserver = std::function<void(const OpTiming&)>;

}  // namespace sacplan

#endif  // SACPLAN_EXECUTOR_OP_OBSERVER_H_
