#include "search/block_class.h"

#include "memory/two_timelines.h"
#include "sacplan/planner/memory/schedule.h"

namespace sacplan {

BlockCost InTimesOf(const BlockAnalysis& block, const SaveMask& mask,
                    const SimulatedSaveSet& simulated) {
  BlockCost cost = simulated.cost;
  cost.host_wait_ms = block.has_host_times
      ? BlockHostWaitMs(block, LowerBlock(block, mask, simulated.semantics)) : 0;
  if (simulated.torch_sac_checkpointed) {
    cost.recompute_ms = TorchSacCheckpointMs(block, mask);
    return cost;
  }
  // In RecomputeMs's order, so that the sum is the same to the last bit.
  cost.recompute_ms = 0;
  for (int k : simulated.recomputed_ops) cost.recompute_ms += block.ops[k].fwd_ms;
  return cost;
}

BlockAnalysis MeanTimes(const std::vector<const BlockAnalysis*>& blocks) {
  BlockAnalysis mean = *blocks.front();
  if (blocks.size() == 1) return mean;
  const double share = 1.0 / static_cast<double>(blocks.size());
  auto average = [&](double OpNode::*field) {
    for (int k = 0; k < mean.op_count(); ++k) {
      double sum = 0;
      for (const BlockAnalysis* block : blocks) sum += block->ops[k].*field;
      mean.ops[k].*field = sum * share;
    }
  };
  for (double OpNode::*field :
       {&OpNode::fwd_ms, &OpNode::bwd_ms, &OpNode::checkpointed_fwd_extra_ms,
        &OpNode::saved_fwd_extra_ms, &OpNode::checkpointed_bwd_extra_ms,
        &OpNode::recompute_ms, &OpNode::replay_ms}) {
    average(field);
  }
  mean.fwd_ms = 0;
  mean.bwd_ms = 0;
  for (const OpNode& op : mean.ops) {
    mean.fwd_ms += op.fwd_ms;
    mean.bwd_ms += op.bwd_ms;
  }
  return mean;
}

const SimulatedSaveSet& BlockClass::Simulate(const SaveMask& mask, Semantics semantics) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto found = simulated.find(mask);
    if (found != simulated.end()) return found->second;
  }
  SimulatedSaveSet fresh;
  fresh.cost = EvaluateBlock(*analysis, mask, semantics);
  fresh.semantics = semantics;
  fresh.torch_sac_checkpointed =
      semantics == Semantics::kTorchSac && !EveryOpSaved(*analysis, mask);
  if (!fresh.torch_sac_checkpointed) fresh.recomputed_ops = RecomputedOps(*analysis, mask);
  std::lock_guard<std::mutex> lock(mutex);
  return simulated.emplace(mask, std::move(fresh)).first->second;
}

}  // namespace sacplan
