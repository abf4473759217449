// Internal to sacplan_executor: what the block stack (block_stack.cc) holds
// between a forward and its backward, shared with the offload steps
// (block_offload.cc) that move its kept tensors to the host and back.
#ifndef SACPLAN_EXECUTOR_SRC_STACK_STATE_H_
#define SACPLAN_EXECUTOR_SRC_STACK_STATE_H_

#include <memory>
#include <span>
#include <vector>

#include <ATen/ATen.h>

#include "block_stack.h"
#include "host_copies.h"
#include "sacplan/metering/memory_meter.h"
#include "sacplan/planner/memory/memory_tracker.h"
#include "sacplan/planner/memory/schedule.h"

namespace sacplan::executor_internal {

// Live tensors of one block, by BlockAnalysis tensor index.
using TensorTable = std::vector<at::Tensor>;

// The memory account (memory_meter.h) a category's bytes are charged to.
static_assert(kMemoryCategoryCount <= kMemoryAccountCount);
inline int Account(MemoryCategory category) { return static_cast<int>(category); }

// Everything the blocks hold between forward and backward.
struct StackState {
  const TorchModel* model = nullptr;
  const AnalyzedModel* analyzed = nullptr;
  const std::vector<BlockSchedule>* schedules = nullptr;
  std::shared_ptr<RecomputeCounter> counter;
  const MomentObserver* observer = nullptr;  // may be null or empty
  std::vector<at::Tensor> shared;     // BlockStackInputs::shared
  std::vector<TensorTable> live;      // per block: kept tensors
  // Per block, per offload copy (BlockSchedule::offload): its host tensor.
  std::vector<std::vector<at::Tensor>> host;
  std::unique_ptr<HostCopies> copies;  // made at the first offload
  // Per block input tensor index: the slot in `shared`, or -1.
  std::vector<std::vector<int>> shared_slot;
};

inline void FreeAll(TensorTable& table, std::span<const int> indices) {
  for (int t : indices) table[t].reset();
}

}  // namespace sacplan::executor_internal

#endif  // SACPLAN_EXECUTOR_SRC_STACK_STATE_H_
