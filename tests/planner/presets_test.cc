#include "sacplan/planner/search/presets.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_graphs.h"

namespace sacplan {
namespace {

using testing::MakeOp;
using testing::Tensor;

// q, k (linears), attn, proj (biased linear: addmm), act (gelu), fc (linear),
// out (residual add): three matmuls before attention's output is used and
// two after, so TorchTitan's every-other-matmul rule has something to skip.
Block MixedBlock(int index) {
  Block block;
  block.index = index;
  block.inputs.push_back({Tensor("x", 64), InputKind::kCarried});
  block.ops.push_back(MakeOp("q", "linear", {"x"}, {Tensor("q", 64)}, {"x"}, 1, 2));
  block.ops.push_back(MakeOp("k", "linear", {"x"}, {Tensor("k", 64)}, {"x"}, 1, 2));
  block.ops.push_back(MakeOp("attn", "attention", {"q", "k"}, {Tensor("attn", 64)},
                             {"q", "k", "attn"}, 4, 8));
  block.ops.push_back(MakeOp("proj", "addmm", {"attn"}, {Tensor("proj", 64)}, {"attn"}, 1, 2));
  block.ops.push_back(MakeOp("act", "gelu", {"proj"}, {Tensor("act", 64)}, {"proj"}, 1, 1));
  block.ops.push_back(MakeOp("fc", "matmul", {"act"}, {Tensor("fc", 64)}, {"act"}, 1, 2));
  block.ops.push_back(MakeOp("out", "add", {"x", "fc"}, {Tensor("out", 64)}, {}, 1, 1));
  block.outputs = {"out"};
  return block;
}

struct Fixture {
  Model model;
  AnalyzedModel analyzed;
  explicit Fixture(int blocks) {
    for (int b = 0; b < blocks; ++b) model.blocks.push_back(MixedBlock(b));
    analyzed = *AnalyzeModel(model);
  }
};

std::vector<SaveMask> Masks(const Fixture& f, const std::string& name) {
  const absl::StatusOr<std::vector<SaveMask>> masks = PresetMasks(f.analyzed, name);
  EXPECT_TRUE(masks.ok()) << name << ": " << masks.status();
  return masks.ok() ? *masks : std::vector<SaveMask>{};
}

TEST(PresetsTest, EachPresetSavesWhatItsTrainingStackSaves) {
  const Fixture f(2);
  //                         q      k      attn   proj   act    fc     out
  const SaveMask none      = {true,  true,  true,  true,  true,  true,  true};
  const SaveMask full      = {false, false, false, false, false, false, false};
  const SaveMask titan     = {true,  false, true,  true,  false, false, false};
  const SaveMask attn_only = {false, false, true,  false, false, false, false};
  const SaveMask megatron  = {true,  true,  false, true,  true,  true,  true};
  for (const auto& [name, want] :
       std::vector<std::pair<std::string, SaveMask>>{{"none", none},
                                                     {"full", full},
                                                     {"torchtitan", titan},
                                                     {"attn_only", attn_only},
                                                     {"megatron", megatron}}) {
    EXPECT_EQ(Masks(f, name), (std::vector<SaveMask>{want, want})) << name;
  }
}

TEST(PresetsTest, EveryNthCheckpointsBlocksZeroNTwoN) {
  const Fixture f(5);
  const SaveMask none(7, true), full(7, false);
  EXPECT_EQ(Masks(f, "every_nth:2"), (std::vector<SaveMask>{full, none, full, none, full}));
  EXPECT_EQ(Masks(f, "every_nth:3"), (std::vector<SaveMask>{full, none, none, full, none}));
  EXPECT_EQ(Masks(f, "every_nth:1"), Masks(f, "full"));
  EXPECT_EQ(Masks(f, "every_nth:9"), (std::vector<SaveMask>{full, none, none, none, none}));
}

TEST(PresetsTest, NeverSaveOpsAreLeftOutExceptByNone) {
  Fixture f(1);
  f.model.blocks[0].ops[2].never_save = true;  // attn
  f.analyzed = *AnalyzeModel(f.model);
  EXPECT_FALSE(Masks(f, "attn_only")[0][2]);
  EXPECT_FALSE(Masks(f, "torchtitan")[0][2]);
  EXPECT_TRUE(Masks(f, "none")[0][2]);
}

TEST(PresetsTest, RejectsUnknownNamesAndBadN) {
  const Fixture f(2);
  for (const char* bad : {"every_nth:0", "every_nth:-2", "every_nth:x", "every_nth:",
                          "every_nth:2.5", "selective", "Full", ""}) {
    const absl::StatusOr<std::vector<SaveMask>> masks = PresetMasks(f.analyzed, bad);
    ASSERT_FALSE(masks.ok()) << bad;
    EXPECT_EQ(masks.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(masks.status().message().find(std::string("'") + bad + "'"),
              std::string::npos)
        << masks.status();
  }
}

TEST(PresetsTest, NamesListEveryPresetAndComparedNamesAreAllAccepted) {
  EXPECT_EQ(PresetNames(), (std::vector<std::string>{"none", "full", "torchtitan",
                                                     "attn_only", "megatron",
                                                     "every_nth:N"}));
  const Fixture f(3);
  const std::vector<std::string> compared = ComparedPresetNames();
  EXPECT_EQ(compared.size(), PresetNames().size() + 1);
  for (const std::string& name : compared) {
    EXPECT_TRUE(PresetMasks(f.analyzed, name).ok()) << name;
  }
}

}  // namespace
}  // namespace sacplan
