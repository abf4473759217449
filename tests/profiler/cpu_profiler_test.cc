// The measured CPU profiler on the tiny models: a valid profile with the
// graph's sizes, positive measured times, the workspace the counting
// allocator sees, and workspaces that repeat between runs.
#include "sacplan/orchestration/whole_step.h"
#include "sacplan/profiler/cpu_profiler.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "sacplan/models/graph_builder.h"
#include "sacplan/planner/memory/simulator.h"
#include "support/model_lookup.h"

namespace sacplan {
namespace {

using ::sacplan::testing::Config;
using ::sacplan::testing::FindOp;

CpuProfileOptions Quick() {
  CpuProfileOptions options;
  options.warmup = 1;
  options.repeats = 3;
  // One thread: this suite runs beside other builds on few cores, where a
  // parallel region's time is a descheduled thread's time slice.
  options.threads = 1;
  return options;
}

// One measurement per model for the whole suite: profiling is the slow part.
const CpuProfileResult& Measured(const std::string& name) {
  static std::map<std::string, CpuProfileResult>* cache =
      new std::map<std::string, CpuProfileResult>;
  auto it = cache->find(name);
  if (it == cache->end()) {
    absl::StatusOr<CpuProfileResult> result =
        MeasureCpuProfileWithWholeSteps(Config(name), Quick());
    EXPECT_TRUE(result.ok()) << result.status();
    if (!result.ok()) std::abort();
    it = cache->emplace(name, *std::move(result)).first;
  }
  return it->second;
}

class CpuProfilerTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CpuProfilerTest, ValidProfileWithTheGraphsSizesAndMeasuredTimes) {
  const CpuProfileResult& result = Measured(GetParam());
  const Profile& profile = result.profile;
  EXPECT_EQ(profile.source, "cpu");
  EXPECT_EQ(profile.device, "cpu");
  EXPECT_EQ(profile.model_name, GetParam());
  EXPECT_EQ(result.threads, 1);
  ASSERT_TRUE(ValidateModel(profile.model).ok());

  absl::StatusOr<Model> graph = BuildModelGraph(Config(GetParam()));
  ASSERT_TRUE(graph.ok());
  ASSERT_EQ(profile.model.blocks.size(), graph->blocks.size());
  for (size_t b = 0; b < graph->blocks.size(); ++b) {
    const Block& got = profile.model.blocks[b];
    const Block& want = graph->blocks[b];
    EXPECT_EQ(got.index, static_cast<int>(b));
    ASSERT_EQ(got.ops.size(), want.ops.size());
    for (size_t i = 0; i < want.ops.size(); ++i) {
      const Op& op = got.ops[i];
      SCOPED_TRACE(op.id);
      EXPECT_EQ(op.id, want.ops[i].id);
      EXPECT_GT(op.fwd_ms, 0);
      EXPECT_GT(op.bwd_ms, 0);
      EXPECT_EQ(op.param_bytes, want.ops[i].param_bytes);
      ASSERT_EQ(op.outputs.size(), want.ops[i].outputs.size());
      for (size_t k = 0; k < op.outputs.size(); ++k) {
        EXPECT_EQ(op.outputs[k].bytes, want.ops[i].outputs[k].bytes);
      }
    }
    // Every block is block 0's measurement: one structure for the planner.
    EXPECT_TRUE(SameStructure(got, profile.model.blocks.front()));
  }
  const FixedMemory& fixed = profile.model.fixed;
  EXPECT_EQ(fixed.param_bytes, graph->fixed.param_bytes);
  EXPECT_EQ(fixed.optimizer_state_bytes, graph->fixed.optimizer_state_bytes);
  EXPECT_EQ(fixed.nonblock_grad_bytes, graph->fixed.nonblock_grad_bytes);
  EXPECT_GT(fixed.head_fwd_ms, 0);
  EXPECT_GT(fixed.head_bwd_ms, 0);
  EXPECT_GT(fixed.optimizer_ms, 0);
  EXPECT_GT(fixed.head_bytes, 0);
  // AdamW's step divides by sqrt(v) + eps: scratch per parameter tensor.
  EXPECT_GT(fixed.optimizer_step_bytes, 0);
  // The simulator takes it as it takes a roofline profile.
  absl::StatusOr<AnalyzedModel> analyzed = AnalyzeModel(profile.model);
  ASSERT_TRUE(analyzed.ok()) << analyzed.status();
}

TEST_P(CpuProfilerTest, MeasuredSizesAgreeWithTheGraphBuilder) {
  // A size note reports a measured fixed size that differs from the
  // graph's. Notes of other kinds (a whole step measured faster than its
  // parts, which a loaded machine can cause) are about time, not sizes.
  for (const ProfileNote& note : Measured(GetParam()).notes) {
    if (note.kind == ProfileNoteKind::kSizeDiffers) ADD_FAILURE() << note.message;
  }
}

// Memory does not depend on timing: a second measurement gives the same
// workspaces. (How much the times move between runs is
// bench_cpu_profiler's BM_CpuProfileRepeat, not a pass/fail matter.)
TEST_P(CpuProfilerTest, WorkspacesRepeatBetweenRuns) {
  absl::StatusOr<CpuProfileResult> again =
      MeasureCpuProfileWithWholeSteps(Config(GetParam()), Quick());
  ASSERT_TRUE(again.ok()) << again.status();
  const Block& first = Measured(GetParam()).profile.model.blocks[0];
  const Block& second = again->profile.model.blocks[0];
  ASSERT_EQ(first.ops.size(), second.ops.size());
  for (size_t i = 0; i < first.ops.size(); ++i) {
    EXPECT_EQ(first.ops[i].workspace_bytes, second.ops[i].workspace_bytes)
        << first.ops[i].id;
    EXPECT_EQ(first.ops[i].bwd_workspace_bytes, second.ops[i].bwd_workspace_bytes)
        << first.ops[i].id;
  }
}

INSTANTIATE_TEST_SUITE_P(TinyModels, CpuProfilerTest,
                         ::testing::Values("wan-tiny", "llama-tiny"));

TEST(CpuProfilerWorkspaceTest, BfloatLinearCastsItsFloatWeight) {
  // wan-tiny's activations are bfloat16 and its parameters float32: a
  // linear casts its weight to bfloat16 for the GEMM, scratch that is gone
  // when it returns.
  const Block& block = Measured("wan-tiny").profile.model.blocks[0];
  const Op& q = FindOp(block, "self_attn.q");
  const ModelConfig config = Config("wan-tiny");
  EXPECT_GE(q.workspace_bytes, config.dim * config.dim * 2) << q.workspace_bytes;
}

TEST(CpuProfilerWorkspaceTest, OneKernelOpsHaveNoScratch) {
  // GELU is one ATen kernel that writes only its result, forward and
  // backward: all the meter sees beyond the output (or the returned
  // gradient) is scratch, and there is none. Counting the output as scratch,
  // or not subtracting it, shows up here.
  const Block& block = Measured("wan-tiny").profile.model.blocks[0];
  int gelus = 0;
  for (const Op& op : block.ops) {
    if (op.kind != "gelu") continue;
    ++gelus;
    EXPECT_EQ(op.workspace_bytes, 0) << op.id;
    EXPECT_EQ(op.bwd_workspace_bytes, 0) << op.id;
  }
  EXPECT_EQ(gelus, 1);
}

TEST(CpuProfilerOptionsTest, RejectsBadRepeats) {
  CpuProfileOptions options;
  options.repeats = 0;
  absl::StatusOr<CpuProfileResult> result =
      MeasureCpuProfileWithWholeSteps(Config("wan-tiny"), options);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(result.status().message().find("--repeats"), std::string::npos);
}

// Wan's text embedding keeps its [batch, text_tokens, 4096] input, cast to
// the activation dtype (bf16), for its backward; LLaMA's token gather keeps
// only the batch's token ids, which were allocated before the step.
TEST(CpuProfilerTest, EmbeddingSavedBytesHoldTheTextEmbeddingsInput) {
  ModelConfig wan = Config("wan-tiny");
  wan.text_tokens = 128;
  CpuProfileOptions options = Quick();
  options.repeats = 1;
  options.warmup = 0;
  auto measured = MeasureCpuProfileWithWholeSteps(wan, options);
  ASSERT_TRUE(measured.ok()) << measured.status();
  const int64_t text_input_bytes = wan.batch * wan.text_tokens * 4096 * 2;
  EXPECT_GE(measured->profile.model.fixed.embedding_saved_bytes, text_input_bytes);
  EXPECT_LT(measured->profile.model.fixed.embedding_saved_bytes, 2 * text_input_bytes);
  EXPECT_EQ(Measured("llama-tiny").profile.model.fixed.embedding_saved_bytes, 0);
}

TEST(CpuProfilerOptionsTest, ReportsProgressToTheEnd) {
  CpuProfileOptions options = Quick();
  options.repeats = 1;
  options.warmup = 0;
  int last_done = -1, last_total = 0, calls = 0;
  options.progress = [&](int done, int total) {
    EXPECT_EQ(done, last_done + 1);
    last_done = done;
    last_total = total;
    ++calls;
  };
  ASSERT_TRUE(MeasureCpuProfileWithWholeSteps(Config("llama-tiny"), options).ok());
  EXPECT_EQ(last_done, last_total);
  EXPECT_EQ(calls, last_total + 1);  // 0 first, then one per unit
  const size_t ops = BuildModelGraph(Config("llama-tiny"))->blocks[0].ops.size();
  // Each op forward and backward, the head, the optimizer, the whole steps.
  EXPECT_EQ(last_total, static_cast<int>(2 * ops + 3));
}

}  // namespace
}  // namespace sacplan
