// Small op graphs for planner tests: a hand-written chain and random DAGs.
#ifndef SACPLAN_TESTS_PLANNER_TEST_GRAPHS_H_
#define SACPLAN_TESTS_PLANNER_TEST_GRAPHS_H_

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "sacplan/planner/ir/graph.h"
#include "sacplan/planner/memory/simulator.h"

namespace sacplan::testing {

// A tensor of `bytes` bytes named `id`.
TensorInfo Tensor(const std::string& id, int64_t bytes, bool requires_grad = true);

// An op with the given tensors and times; the other fields default.
Op MakeOp(const std::string& id, const std::string& kind,
          std::vector<std::string> inputs, std::vector<TensorInfo> outputs,
          std::vector<std::string> needs, double fwd_ms, double bwd_ms);

// x -> fc (linear, needs x) -> act (gelu, needs fc.out) -> add (x + act.out).
// fc.out is 4 bytes per unit of `width`, act.out the same, x 2 units.
Block ChainBlock(int index, int64_t width = 100);

// A model of `blocks` ChainBlocks with fixed memory `fixed_bytes`.
Model ChainModel(int blocks, int64_t fixed_bytes = 1000);

// A random block: `ops` ops over a carried input of `residual_bytes` and a
// shared input, with random sizes, times, backward needs, workspaces and
// parameter bytes. The last op is a residual add that the block hands on.
Block RandomBlock(int index, int ops, uint32_t seed, int64_t residual_bytes,
                  int64_t shared_bytes);

// `blocks` random blocks (all from `seed` when `identical`, else one seed
// each), fixed memory and head costs.
Model RandomModel(int blocks, int ops, uint32_t seed, bool identical);

// RandomModel's three blocks of five ops under FSDP on 4 ranks, with
// random buffer sizes and scratch; collective times 0, so that step time
// is compute alone.
Model RandomFsdpModel(uint32_t seed);

// Gives every op random measured torch-sac costs (Op::checkpointed_fwd_ms,
// saved_fwd_ms, recompute_ms, replay_ms): checkpointed forwards (saved
// ones dearer still) and a recompute dearer than fwd_ms, a replay anywhere
// from free to dearer than the recompute.
void AddTorchSacCosts(Model& model, uint32_t seed);

// A double-stream block (Flux, SD3): RandomBlock's ops over the image
// stream "x", and a text stream "txt" of `text_bytes` that mixes with the
// first image op's output ("txt.mix", linear) and ends in its own residual
// add ("txt.residual"). Outputs: {"residual.out", "txt.residual.out"}.
Block RandomTwoStreamBlock(int index, int ops, uint32_t seed, int64_t residual_bytes,
                           int64_t text_bytes, int64_t shared_bytes);

// RandomModel's fixed memory and head over RandomTwoStreamBlocks.
Model RandomTwoStreamModel(int blocks, int ops, uint32_t seed, bool identical);

// A double-stream block that runs its streams as one sequence (Flux's
// single-stream blocks): its first op cats the text stream "txt" and the
// image stream "img" into "x", RandomBlock's ops run over x, and two
// linears each read their stream's slice of the residual ("img.proj",
// "txt.proj"). Outputs: {"img.proj.out", "txt.proj.out"}. Nothing but the
// cat reads the carried inputs, so their gradients are both views of the
// cat's output gradient.
Block RandomCatStreamsBlock(int index, int ops, uint32_t seed, int64_t image_bytes,
                            int64_t text_bytes, int64_t shared_bytes);

// RandomModel's fixed memory and head over RandomCatStreamsBlocks.
Model RandomCatStreamsModel(int blocks, int ops, uint32_t seed, bool identical);

// Live bytes after the moment (phase, block, op) of a step simulated with
// record_timeline; a test failure and -1 when the timeline has no such moment.
int64_t LiveAt(const StepResult& step, Phase phase, int block, const std::string& op);

// The most live bytes over the moments of a step simulated with
// record_timeline whose StepLocation `pick` selects; -1 when it selects
// none.
template <typename Pick>
int64_t MostLive(const StepResult& step, Pick pick) {
  int64_t most = -1;
  for (const TimelinePoint& point : step.timeline) {
    if (pick(point.where)) most = std::max(most, point.total_bytes);
  }
  return most;
}

// A save mask of `block` with each op saved or not at even odds, from `rng`.
SaveMask RandomSaveMask(const BlockAnalysis& block, std::mt19937& rng);

}  // namespace sacplan::testing

#endif  // SACPLAN_TESTS_PLANNER_TEST_GRAPHS_H_
