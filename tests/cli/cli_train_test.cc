// `sacplan train` and `sacplan autotune` end to end: a measured profile, a
// plan, training under it with a run log, and the errors a user can hit.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli_runner.h"

namespace sacplan::testing {
namespace {

namespace fs = std::filesystem;

// A measured wan-tiny profile (fp32) and the plan `plan_args` make from it.
fs::path ProfileAndPlan(const fs::path& dir, const std::vector<std::string>& plan_args) {
  const fs::path profile = dir / "p.json";
  CliResult r = RunSacplan({"profile", "--device", "cpu", "--model", "wan-tiny",
                            "--act-dtype", "float32", "--repeats", "1", "--warmup",
                            "1", "--threads", "1", "-o", profile.string()},
                           dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const fs::path plan = dir / "plan.json";
  std::vector<std::string> args{"plan", "--profile", profile.string(), "-o",
                                plan.string()};
  args.insert(args.end(), plan_args.begin(), plan_args.end());
  r = RunSacplan(args, dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return plan;
}

TEST(CliTrain, TrainsUnderAPlanAndLogsPredictionBesideMeasurement) {
  const fs::path dir = FreshDir("train");
  const fs::path plan = ProfileAndPlan(dir, {"--preset", "full"});
  const fs::path log = dir / "run.json";
  CliResult r = RunSacplan({"train", "--model", "wan-tiny", "--act-dtype", "float32",
                            "--plan", plan.string(), "--steps", "3", "--threads", "1",
                            "--log", log.string()},
                           dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("step   3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("predicted"), std::string::npos) << r.out;
  const nlohmann::json run = ReadJson(log);
  EXPECT_EQ(run.at("losses").size(), 3u);
  EXPECT_EQ(run.at("kernels"), "aten");
  const int64_t predicted = run.at("predicted").at("peak_bytes").get<int64_t>();
  const int64_t measured = run.at("measured").at("peak_bytes").get<int64_t>();
  EXPECT_GT(run.at("measured").at("step_ms").get<double>(), 0);
  // On CPU nothing is cached: the reserved peak is the allocated peak with
  // the batch's own tensors, which peak_bytes leaves out.
  const int64_t reserved = run.at("measured").at("peak_reserved_bytes").get<int64_t>();
  EXPECT_GT(reserved, measured);
  EXPECT_LT(reserved, measured + measured / 2);
  EXPECT_NEAR(static_cast<double>(measured), static_cast<double>(predicted),
              0.02 * static_cast<double>(predicted));
  // Full checkpointing re-runs ops, and the executor did what the plan said.
  EXPECT_GT(run.at("predicted").at("recomputed_ops").get<int>(), 0);
  EXPECT_EQ(run.at("measured").at("recomputed_ops"),
            run.at("predicted").at("recomputed_ops"));
}

TEST(CliTrain, RefusesAPlanForAnotherModelOrShape) {
  const fs::path dir = FreshDir("train_mismatch");
  const fs::path plan = ProfileAndPlan(dir, {"--preset", "none"});
  CliResult r = RunSacplan({"train", "--model", "llama-tiny", "--plan", plan.string()}, dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(LineCount(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("is for model 'wan-tiny'"), std::string::npos) << r.err;

  r = RunSacplan({"train", "--model", "wan-tiny", "--act-dtype", "float32", "--tokens",
                  "128", "--plan", plan.string()},
                 dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("tokens=96"), std::string::npos) << r.err;

  // An op id the model's block does not have.
  nlohmann::json doc = ReadJson(plan);
  doc["blocks"][0]["save"].push_back("self_attn.not_an_op");
  const fs::path edited = dir / "edited.json";
  WriteJson(edited, doc);
  const fs::path log = dir / "run.json";
  r = RunSacplan({"train", "--model", "wan-tiny", "--act-dtype", "float32", "--plan",
                  edited.string(), "--log", log.string()},
                 dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(LineCount(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("self_attn.not_an_op"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(log));
}

TEST(CliTrain, CudaWithoutAGpuIsOneLine) {
  if (!ReadText("/proc/driver/nvidia/version").empty()) GTEST_SKIP() << "has a GPU";
  const fs::path dir = FreshDir("train_cuda");
  const fs::path plan = ProfileAndPlan(dir, {"--preset", "none"});
  CliResult r = RunSacplan({"train", "--model", "wan-tiny", "--act-dtype", "float32",
                            "--plan", plan.string(), "--device", "cuda"},
                           dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(LineCount(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("cuda"), std::string::npos) << r.err;
}

// A plan whose pinned host peak exceeds the host memory available now
// (here SACPLAN_HOST_AVAILABLE_BYTES) is refused before anything is
// pinned: one line naming both figures, exit 2, no run log (issue 40: the
// kernel killed such a run for host memory).
TEST(CliTrain, RefusesAPlanNeedingMoreHostMemoryThanIsAvailable) {
  const fs::path dir = FreshDir("train_host_memory");
  // Wide enough that activations decide the peak (as autotune's test), with
  // a fast host link: at 40 MB the plan offloads instead of recomputing.
  const std::vector<std::string> model = {
      "--model", "wan-tiny", "--act-dtype", "float32", "--dim", "128", "--heads", "4",
      "--ffn", "384", "--tokens", "512", "--text-tokens", "32", "--layers", "4"};
  const fs::path profile = dir / "p.json";
  std::vector<std::string> args = {"profile", "--device", "cpu", "--repeats", "1",
                                   "--warmup", "1", "--threads", "1", "-o",
                                   profile.string()};
  args.insert(args.end(), model.begin(), model.end());
  ASSERT_EQ(RunSacplan(args, dir).exit_code, 0);
  nlohmann::json doc = ReadJson(profile);
  doc["device"]["host_link"] = {{"d2h_gbps", 1000}, {"h2d_gbps", 1000},
                                {"host_memory_bytes", int64_t{1} << 40}};
  WriteJson(profile, doc);
  const fs::path plan = dir / "offload.json";
  CliResult r = RunSacplan({"plan", "--profile", profile.string(), "--budget", "40MB", "-o",
                            plan.string()},
                           dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const int64_t host_peak_bytes =
      ReadJson(plan).at("predicted").value("host_peak_bytes", int64_t{0});
  ASSERT_GT(host_peak_bytes, 0);
  const fs::path log = dir / "run.json";
  ASSERT_EQ(setenv("SACPLAN_HOST_AVAILABLE_BYTES",
                   std::to_string(host_peak_bytes - 1).c_str(), /*overwrite=*/1),
            0);
  std::vector<std::string> train = {"train", "--plan", plan.string(), "--profile",
                                    profile.string(), "--steps", "1", "--log", log.string()};
  train.insert(train.end(), model.begin(), model.end());
  r = RunSacplan(train, dir);
  unsetenv("SACPLAN_HOST_AVAILABLE_BYTES");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(LineCount(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("of pinned host memory"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--host-budget"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("step"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(log));

  // Exactly enough: it trains.
  ASSERT_EQ(setenv("SACPLAN_HOST_AVAILABLE_BYTES", std::to_string(host_peak_bytes).c_str(),
                   /*overwrite=*/1),
            0);
  r = RunSacplan(train, dir);
  unsetenv("SACPLAN_HOST_AVAILABLE_BYTES");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(log));
}

// Fused kernels run only on CUDA; an unknown implementation is CLI11's
// IsMember error. Both are one line and exit status 2.
TEST(CliTrain, FusedKernelsOnTheCpuOrAnUnknownKernelsIsOneLine) {
  const fs::path dir = FreshDir("train_kernels");
  const fs::path plan = ProfileAndPlan(dir, {"--preset", "none"});
  for (const char* kernels : {"fused", "triton"}) {
    CliResult r = RunSacplan({"train", "--model", "wan-tiny", "--act-dtype", "float32",
                              "--plan", plan.string(), "--kernels", kernels},
                             dir);
    EXPECT_EQ(r.exit_code, 2) << kernels;
    EXPECT_EQ(LineCount(r.err), 1) << r.err;
    EXPECT_NE(r.err.find("--kernels"), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("step"), std::string::npos) << r.out;
  }
}

// A lower bound reads as one short line (CLI11's PositiveNumber printed
// both of its double bounds in full: 330 characters).
TEST(CliTrain, ZeroStepsIsAShortLineNamingTheFlag) {
  const fs::path dir = FreshDir("train_zero_steps");
  CliResult r = RunSacplan({"train", "--model", "wan-tiny", "--plan",
                            (dir / "absent.json").string(), "--steps", "0"},
                           dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(LineCount(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("--steps: Value 0 not in range 1 to"), std::string::npos) << r.err;
  EXPECT_LT(r.err.size(), 100u) << r.err;
}

TEST(CliAutotune, FindsAPlanWhoseMeasuredPeakFits) {
  const fs::path dir = FreshDir("autotune");
  // Wide enough that activations decide the peak: 40 MB sits between full
  // checkpointing (~31 MB) and saving everything (~48 MB).
  const fs::path plan = dir / "plan.json";
  CliResult r = RunSacplan(
      {"autotune", "--model", "wan-tiny", "--act-dtype", "float32", "--dim", "128",
       "--heads", "4", "--ffn", "384", "--tokens", "512", "--text-tokens", "32",
       "--layers", "4", "--budget", "40MB", "--threads", "1", "-o", plan.string()},
      dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("round 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fits"), std::string::npos) << r.out;
  // The measured check trained a preset beside the plan and said which won.
  EXPECT_NE(r.out.find("check: preset "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("chose "), std::string::npos) << r.out;
  const nlohmann::json doc = ReadJson(plan);
  EXPECT_LE(doc.at("predicted").at("peak_bytes").get<int64_t>(), 40000000);
  bool recomputes = false;
  for (const nlohmann::json& block : doc.at("blocks")) recomputes |= block.at("checkpoint").get<bool>();
  EXPECT_TRUE(recomputes) << "a 40 MB budget needs some recompute";

  CliResult unchecked = RunSacplan(
      {"autotune", "--model", "wan-tiny", "--act-dtype", "float32", "--dim", "128",
       "--heads", "4", "--ffn", "384", "--tokens", "512", "--text-tokens", "32",
       "--layers", "4", "--budget", "40MB", "--threads", "1", "--no-preset-check"},
      dir);
  ASSERT_EQ(unchecked.exit_code, 0) << unchecked.err;
  EXPECT_EQ(unchecked.out.find("check: preset "), std::string::npos) << unchecked.out;
}

TEST(CliAutotune, ImpossibleBudgetNamesTheSmallestFeasibleOne) {
  const fs::path dir = FreshDir("autotune_budget");
  CliResult r = RunSacplan({"autotune", "--model", "wan-tiny", "--budget", "1MB",
                            "--threads", "1"},
                           dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(LineCount(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("smallest feasible budget"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace sacplan::testing
