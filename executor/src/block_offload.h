// Internal to sacplan_executor: the offload steps of the block stack. Each
// block schedule's offload copies (BlockSchedule::offload, CopyWindows) say
// after which forward step a kept tensor goes to the host, when its device
// buffer is dropped, and before which backward step it comes back; the block
// stack calls these at every step, and they do nothing for a block without
// copies.
#ifndef SACPLAN_EXECUTOR_SRC_BLOCK_OFFLOAD_H_
#define SACPLAN_EXECUTOR_SRC_BLOCK_OFFLOAD_H_

#include <span>

#include "sacplan/planner/memory/schedule.h"
#include "stack_state.h"

namespace sacplan::executor_internal {

// After block b's forward step k (-1: as the forward starts): the copies
// issued then go to the host, and the device buffers freed then are dropped.
void OffloadAfter(StackState& state, int b, int k, TensorTable& table);

// Before block b's backward step s: the prefetches issued then, back on the
// device as kept tensors. Led copies (`led`) are issued at the block after's
// lead trigger instead (LeadBefore).
void PrefetchBefore(StackState& state, int b, int s, TensorTable& table, bool led = false);

// Offload windows (CopyWindows) of block b-1 in block b's steps.
// Before b's forward step k: b-1's copies spilled that far drop their device
// tensors; at b-1's spill trigger compute first waits for every copy to the
// host, then drops the rest.
void SpillBefore(StackState& state, int b, int k);

// Before b's backward step `step`: at b-1's lead trigger, b-1's led copies
// back.
void LeadBefore(StackState& state, int b, const ScheduleStep& step);

// Frees `indices` of block b's table and the host copies of those offloaded.
void FreeWithHostCopies(StackState& state, int b, TensorTable& table,
                        std::span<const int> indices);

}  // namespace sacplan::executor_internal

#endif  // SACPLAN_EXECUTOR_SRC_BLOCK_OFFLOAD_H_
