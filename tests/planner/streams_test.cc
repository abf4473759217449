// Blocks that carry several streams (Flux/SD3/HunyuanVideo double-stream
// blocks: image and text tokens in, image and text tokens out): the profile
// reader, the simulator's count per stream and per block, gradients the
// streams share, the fingerprint.
#include <gtest/gtest.h>

#include <string>

#include "sacplan/planner/plan_io/plan.h"
#include "sacplan/planner/search/presets.h"
#include "sacplan/planner/plan_io/profile.h"
#include "sacplan/planner/memory/simulator.h"
#include "test_graphs.h"

namespace sacplan {
namespace {

using nlohmann::json;

json TensorJson(const std::string& id, int64_t bytes) {
  return {{"id", id}, {"bytes", bytes}};
}

json OpJson(const std::string& id, const std::string& kind, json inputs, const std::string& out,
            int64_t bytes, json needs) {
  return {{"id", id},         {"kind", kind},         {"inputs", std::move(inputs)},
          {"outputs", {TensorJson(out, bytes)}},      {"backward_needs", std::move(needs)},
          {"fwd_ms", 1.0},    {"bwd_ms", 2.0}};
}

// Per block: img (100 B) and txt (40 B) carried, each through a linear of
// its own size and a residual add; the outputs are [ri.out, rt.out].
json TwoStreamProfile(int blocks) {
  json list = json::array();
  for (int b = 0; b < blocks; ++b) {
    json img = TensorJson("img", 100);
    img["kind"] = "carried";
    json txt = TensorJson("txt", 40);
    txt["kind"] = "carried";
    list.push_back(
        {{"index", b},
         {"inputs", {img, txt}},
         {"outputs", {"ri.out", "rt.out"}},
         {"ops",
          {OpJson("fi", "linear", {"img"}, "fi.out", 100, {"img"}),
           OpJson("ft", "linear", {"txt"}, "ft.out", 40, {"txt"}),
           OpJson("ri", "add", {"img", "fi.out"}, "ri.out", 100, json::array()),
           OpJson("rt", "add", {"txt", "ft.out"}, "rt.out", 40, json::array())}}});
  }
  return {{"schema", kProfileSchema},
          {"model", {{"name", "two-stream"}}},
          {"fixed", {{"param_bytes", 0}, {"optimizer_state_bytes", 0}}},
          {"blocks", list}};
}

std::string ReadError(const json& doc) {
  const auto read = ProfileFromJson(doc);
  return read.ok() ? "ok" : std::string(read.status().message());
}

// Worked by hand, saving every op (both semantics: plain autograd keeps
// what backward reads, here the carried inputs). Forward: each block keeps
// img + txt (140 B) and hands on ri.out + rt.out (140 B); after block 1
// 420 B are live (block 0's inputs, block 1's inputs, block 1's outputs).
// The head adds the outputs' gradients (140 B) and frees the outputs: 420.
// Block 1's backward: the adds pass the gradients through; ft's backward
// adds into txt's gradient, which rt.out's gradient shares with ft.out's,
// so into a new 40 B buffer plus 40 B scratch: 500; afterwards the old
// buffer and txt go: 380. fi's likewise with 100 B: 380 + 200 = 580, the
// step's peak. A text stream counted once for the model (shared) would
// miss block 0's txt and the text gradients.
TEST(StreamsTest, SimulatedPeakCountsEveryStreamPerBlock) {
  const auto profile = ProfileFromJson(TwoStreamProfile(2));
  ASSERT_TRUE(profile.ok()) << profile.status();
  const AnalyzedModel model = *AnalyzeModel(profile->model);
  EXPECT_EQ(model.blocks[1].carried_inputs.size(), 2u);
  const std::vector<SaveMask> all(2, SaveMask(4, true));
  for (Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
    const StepResult step = *SimulateStep(model, all, semantics);
    EXPECT_EQ(step.peak_bytes, 580);
    EXPECT_EQ(step.peak.block, 1);
    EXPECT_EQ(step.peak.op, "fi");
  }
  // One more block adds its two streams' inputs (140 B) to the peak.
  const auto three = ProfileFromJson(TwoStreamProfile(3));
  ASSERT_TRUE(three.ok()) << three.status();
  const StepResult step =
      *SimulateStep(*AnalyzeModel(three->model), std::vector<SaveMask>(3, SaveMask(4, true)),
                    Semantics::kSacplan);
  EXPECT_EQ(step.peak_bytes, 720);
}

// The image stream ends (ri) before the text stream's linear (ft), the last
// op whose backward reads something: PyTorch's re-run under full
// checkpointing recomputes ri's output, a copy nothing reads, which the
// block frees at once; the forward's copy stays the next block's.
TEST(StreamsTest, ReRunRecomputesAnOutputOfAStreamThatEndsBeforeTheStop) {
  json doc = TwoStreamProfile(2);
  for (json& block : doc["blocks"]) std::swap(block["ops"][1], block["ops"][2]);
  // The analysis points into the model, so the profile must outlive it.
  const auto profile = ProfileFromJson(doc);
  ASSERT_TRUE(profile.ok()) << profile.status();
  const AnalyzedModel model = *AnalyzeModel(profile->model);
  const auto step =
      SimulateStep(model, std::vector<SaveMask>(2, SaveMask(4, false)), Semantics::kTorchSac);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(step->recomputed_ops, 4);  // fi and ri in each block
  EXPECT_DOUBLE_EQ(step->recompute_ms, 4.0);
}

// Per block: txt (40 B) and img (60 B) carried and catted into x (100 B),
// h = lin(x), r = x + h, and a linear per stream reading its slice of r:
// the outputs are [pi.out (60 B), pt.out (40 B)].
json CatStreamsProfile(int blocks) {
  json doc = TwoStreamProfile(blocks);
  for (json& block : doc["blocks"]) {
    block["inputs"][0]["bytes"] = 60;
    block["outputs"] = {"pi.out", "pt.out"};
    json pi = OpJson("pi", "linear", {"r"}, "pi.out", 60, {"r"});
    pi["input_grad_bytes"] = {{"r", 60}};
    json pt = OpJson("pt", "linear", {"r"}, "pt.out", 40, {"r"});
    pt["input_grad_bytes"] = {{"r", 40}};
    block["ops"] = {OpJson("cat", "cat", {"txt", "img"}, "x", 100, json::array()),
                    OpJson("lin", "linear", {"x"}, "h", 100, {"x"}),
                    OpJson("res", "add", {"x", "h"}, "r", 100, json::array()), pi, pt};
  }
  return doc;
}

// Both streams' gradients are views of the cat's output gradient (100 B),
// which block 0 receives once and frees once, when its second stream lets
// go. Worked by hand, saving every op, under torch-sac (plain autograd):
// after the head 500 B are live (each block keeps x and r, 200 B, and
// block 1's output gradients, 60 and 40 B, come from the head; 600 B, the
// peak, while the head still holds block 1's outputs). Block 1's
// backward ends with 300 B: block 0's 200 and the one cat gradient. Block
// 0's pt adds its 40 B slice gradient (340); dropping pt.out's gradient
// frees nothing, as pi.out's view still holds the buffer, so pi's 60 B
// slice makes 400, after which the buffer goes. Freed per stream (40 B at
// pt), pi would see 360. Under sacplan every block also keeps its carried
// inputs (100 B) until its backward starts: 100 B more to block 1's
// moments, 200 B at the head's.
TEST(StreamsTest, CatOfBothStreamsFreesTheirSharedGradientOnce) {
  const auto profile = ProfileFromJson(CatStreamsProfile(2));
  ASSERT_TRUE(profile.ok()) << profile.status();
  const AnalyzedModel model = *AnalyzeModel(profile->model);
  for (Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
    SCOPED_TRACE(SemanticsName(semantics));
    for (const std::string& preset : ComparedPresetNames()) {
      const auto step = SimulateStep(model, *PresetMasks(model, preset), semantics);
      EXPECT_TRUE(step.ok()) << preset << ": " << step.status();
    }
    SimulateOptions options;
    options.record_timeline = true;
    const auto saved =
        SimulateStep(model, std::vector<SaveMask>(2, SaveMask(5, true)), semantics, options);
    ASSERT_TRUE(saved.ok()) << saved.status();
    const StepResult& step = *saved;
    const int64_t held_inputs_bytes = semantics == Semantics::kSacplan ? 100 : 0;
    EXPECT_EQ(step.peak_bytes, 600 + 2 * held_inputs_bytes);
    EXPECT_EQ(testing::LiveAt(step, Phase::kBackward, 1, "pt"), 540 + held_inputs_bytes);
    EXPECT_EQ(testing::LiveAt(step, Phase::kBackward, 1, "pi"), 560 + held_inputs_bytes);
    EXPECT_EQ(testing::LiveAt(step, Phase::kBackward, 1, "cat"), 300 + held_inputs_bytes);
    EXPECT_EQ(testing::LiveAt(step, Phase::kBackward, 0, "pt"), 340);
    EXPECT_EQ(testing::LiveAt(step, Phase::kBackward, 0, "pi"), 400);
    EXPECT_EQ(testing::LiveAt(step, Phase::kBackward, 0, "cat"), 100);
  }
}

TEST(StreamsTest, WritesOutputsOnlyForSeveralStreamsAndReadsThemBack) {
  const Profile two = *ProfileFromJson(TwoStreamProfile(2));
  const json written = ProfileToJson(two);
  EXPECT_EQ(written["blocks"][0]["outputs"], json({"ri.out", "rt.out"}));
  EXPECT_FALSE(written["blocks"][0].contains("output"));
  EXPECT_EQ(ProfileFromJson(written)->model.blocks[1].outputs, two.model.blocks[1].outputs);

  Profile one;
  one.model_name = "chain";
  one.model = testing::ChainModel(2);
  const json single = ProfileToJson(one);
  EXPECT_EQ(single["blocks"][0]["output"], "add.out");
  EXPECT_FALSE(single["blocks"][0].contains("outputs"));
}

TEST(StreamsTest, ReaderRefusesMalformedStreams) {
  json doc = TwoStreamProfile(2);
  doc["blocks"][1]["output"] = "ri.out";
  EXPECT_EQ(ReadError(doc),
            "blocks[1].outputs: give \"output\" (one stream) or \"outputs\", not both");

  doc = TwoStreamProfile(2);
  doc["blocks"][1]["outputs"] = {"ri.out"};
  EXPECT_EQ(ReadError(doc), "blocks[1].output: 1 outputs for 2 carried inputs (one output "
                            "per stream)");

  doc = TwoStreamProfile(2);
  doc["blocks"][0]["outputs"] = {"ri.out", "ri.out"};
  EXPECT_EQ(ReadError(doc), "blocks[0].outputs[1]: 'ri.out' is listed twice");

  doc = TwoStreamProfile(2);
  doc["blocks"][0]["outputs"] = {"ri.out", "txt"};
  EXPECT_EQ(ReadError(doc), "blocks[0].outputs[1]: must be produced by an op, not an input");

  doc = TwoStreamProfile(2);
  doc["blocks"][0]["outputs"] = {"ri.out", 7};
  EXPECT_NE(ReadError(doc).find("blocks[0].outputs"), std::string::npos) << ReadError(doc);

  // Block 1 carries one stream (txt is shared there) while block 0 hands on two.
  doc = TwoStreamProfile(2);
  doc["blocks"][1]["inputs"][1]["kind"] = "shared";
  doc["blocks"][1]["outputs"] = {"ri.out"};
  EXPECT_EQ(ReadError(doc), "blocks[1].inputs: 1 carried inputs but blocks[0] has 2 outputs "
                            "(each output is one carried input of the next block)");

  // The text stream's size changes between blocks.
  doc = TwoStreamProfile(2);
  doc["blocks"][1]["inputs"][1]["bytes"] = 48;
  EXPECT_EQ(ReadError(doc), "blocks[1]: carried input 'txt' has 48 bytes but blocks[0] "
                            "outputs 40 (stream 1, 'rt.out')");

  // The last block hands ft.out on, which rt's backward reads.
  doc = TwoStreamProfile(2);
  doc["blocks"][1]["ops"][3]["backward_needs"] = {"ft.out"};
  doc["blocks"][1]["outputs"] = {"ri.out", "ft.out"};
  const Profile reads = *ProfileFromJson(doc);  // caught when the model is analyzed
  EXPECT_EQ(AnalyzeModel(reads.model).status().message(),
            "blocks[1].outputs[1]: 'ft.out' is read by the block's own "
                            "backward; end the block with an op whose backward does not need "
                            "its output (e.g. the residual add)");
}

TEST(StreamsTest, FingerprintAndStructureSeeTheStreams) {
  const Profile two = *ProfileFromJson(TwoStreamProfile(2));
  json swapped_doc = TwoStreamProfile(2);
  for (json& block : swapped_doc["blocks"]) {
    block["outputs"] = {"rt.out", "ri.out"};
    std::swap(block["inputs"][0], block["inputs"][1]);
  }
  const Profile swapped = *ProfileFromJson(swapped_doc);
  EXPECT_NE(GraphFingerprint(two.model), GraphFingerprint(swapped.model));
  EXPECT_FALSE(SameStructure(two.model.blocks[0], swapped.model.blocks[0]));
  EXPECT_TRUE(SameStructure(two.model.blocks[0], two.model.blocks[1]));
}

}  // namespace
}  // namespace sacplan
