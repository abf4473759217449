// The op-kind and dtype tables, and issue 20's latent bug: blocks that differ
// only in an op's kind used to count as one block class in the solver,
// sharing candidates whose costs assume the other block's gradient aliasing.
#include "sacplan/planner/ir/op_kinds.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "search/candidates.h"
#include "sacplan/planner/ir/graph.h"
#include "sacplan/planner/plan_io/plan.h"
#include "sacplan/planner/plan_io/profile.h"
#include "sacplan/planner/memory/simulator.h"
#include "test_graphs.h"

namespace sacplan {
namespace {

TEST(OpKindsTest, RowsGiveClassesGradFlowAndCollectives) {
  for (const char* gemm : {op_kind::kLinear, op_kind::kMatmul, op_kind::kMm, op_kind::kAddmm}) {
    EXPECT_EQ(KindInfo(gemm).op_class, OpClass::kGemm) << gemm;
  }
  EXPECT_EQ(KindInfo(op_kind::kAttention).op_class, OpClass::kAttention);
  EXPECT_EQ(KindInfo(op_kind::kAdd).grad_flow, GradFlow::kPassesThrough);
  EXPECT_EQ(KindInfo(op_kind::kClone).grad_flow, GradFlow::kPassesThrough);
  EXPECT_EQ(KindInfo(op_kind::kCat).grad_flow, GradFlow::kSplits);
  EXPECT_EQ(KindInfo(op_kind::kStack).grad_flow, GradFlow::kSplits);
  EXPECT_TRUE(KindInfo(op_kind::kAllToAll).collective);
  EXPECT_FALSE(KindInfo(op_kind::kGelu).collective);
  // A kind outside the table (an aten name from sacplan_torch) is plain.
  const OpKindInfo other = KindInfo("native_dropout");
  EXPECT_EQ(other.name, "native_dropout");
  EXPECT_EQ(other.op_class, OpClass::kMemoryBound);
  EXPECT_EQ(other.grad_flow, GradFlow::kOwn);
  EXPECT_FALSE(other.collective);
}

TEST(DtypeTableTest, NamesRoundTripAndGiveBytes) {
  for (const Dtype dtype : {Dtype::kFloat32, Dtype::kBFloat16, Dtype::kFloat16,
                            Dtype::kFloat64, Dtype::kComplex128}) {
    EXPECT_EQ(ParseDtype(DtypeName(dtype)), dtype) << DtypeName(dtype);
  }
  EXPECT_EQ(DtypeBytes("bfloat16"), 2);
  EXPECT_EQ(DtypeBytes("float16"), 2);
  EXPECT_EQ(DtypeBytes("float32"), 4);
  EXPECT_EQ(DtypeBytes("float64"), 8);
  EXPECT_EQ(DtypeBytes("complex128"), 16);
  EXPECT_EQ(DtypeBytes("int4"), 0);
  EXPECT_FALSE(ParseDtype("int4").has_value());
}

std::vector<int64_t> BackwardPeaks(const BlockAnalysis& block) {
  std::vector<int64_t> peaks;
  for (const BlockCandidate& c : BlockCandidates(block, Semantics::kSacplan, 16, 1)) {
    peaks.push_back(c.cost.backward_peak_bytes);
  }
  return peaks;
}

// x feeds two linears whose outputs and x meet in one three-input op: when
// that op is an add, its backward hands the output's gradient to all three
// inputs; any other kind makes three new gradients.
Block FanInBlock(int index) {
  Block block;
  block.index = index;
  block.inputs.push_back({testing::Tensor("x", 1000), InputKind::kCarried});
  for (const char* id : {"a", "b"}) {
    block.ops.push_back(testing::MakeOp(id, "linear", {"x"},
                                        {testing::Tensor(std::string(id) + ".out", 1000)},
                                        {"x"}, 1.0, 2.0));
  }
  block.ops.push_back(testing::MakeOp("sum", "add", {"a.out", "b.out", "x"},
                                      {testing::Tensor("sum.out", 1000)}, {}, 0.5, 0.5));
  block.outputs = {"sum.out"};
  return block;
}

TEST(OpKindsTest, BlocksThatDifferOnlyInAKindAreNotOneClass) {
  Profile fan_in;
  fan_in.source = "user";
  fan_in.model_name = "fan_in";
  fan_in.model.blocks = {FanInBlock(0), FanInBlock(1)};
  // A hand-written profile: block 1's sum is a product, whose backward makes
  // new input gradients, where block 0's add hands its own on.
  nlohmann::json doc = ProfileToJson(fan_in);
  ASSERT_EQ(doc["blocks"][1]["ops"][2]["kind"], "add");
  doc["blocks"][1]["ops"][2]["kind"] = "mul";
  const absl::StatusOr<Profile> profile = ProfileFromJson(doc);
  ASSERT_TRUE(profile.ok()) << profile.status();
  const Model& model = profile->model;
  const absl::StatusOr<AnalyzedModel> analyzed = AnalyzeModel(model);
  ASSERT_TRUE(analyzed.ok()) << analyzed.status();
  // The kinds change the candidates' costs, so sharing them would be wrong.
  EXPECT_NE(BackwardPeaks(analyzed->blocks[0]), BackwardPeaks(analyzed->blocks[1]));
  // The solver shares candidates between SameStructure blocks only.
  EXPECT_FALSE(SameStructure(model.blocks[0], model.blocks[1]));
  EXPECT_FALSE(SameStructure(model.blocks[1], model.blocks[0]));
}

// SameStructure and GraphFingerprint read the same OpIdentity: an edit of
// any identity field changes both; a cost edit changes SameStructure only.
TEST(OpIdentityTest, SameStructureAndTheFingerprintAgree) {
  const Model base = testing::ChainModel(2);
  const std::string fingerprint = GraphFingerprint(base);
  const std::vector<std::function<void(Op&)>> identity_edits = {
      [](Op& op) { op.id = "other"; },
      [](Op& op) { op.kind = "mul"; },
      [](Op& op) { op.inputs = {"act.out", "x"}; },
      [](Op& op) { op.outputs[0].id = "other.out"; },
      // A random op constrains which plans replay its numbers.
      [](Op& op) { op.random = true; },
  };
  for (size_t i = 0; i < identity_edits.size(); ++i) {
    Model edited = base;
    identity_edits[i](edited.blocks[1].ops[2]);
    EXPECT_FALSE(SameStructure(base.blocks[1], edited.blocks[1])) << "edit " << i;
    EXPECT_NE(GraphFingerprint(edited), fingerprint) << "edit " << i;
  }
  Model costlier = base;
  costlier.blocks[1].ops[2].fwd_ms += 1;
  EXPECT_FALSE(SameStructure(base.blocks[1], costlier.blocks[1]));
  EXPECT_EQ(GraphFingerprint(costlier), fingerprint);
}

}  // namespace
}  // namespace sacplan
