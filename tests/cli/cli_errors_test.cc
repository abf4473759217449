// Bad input never crashes sacplan and never leaves a partial file: each case
// ends with exit status 2, exactly one stderr line "sacplan: error: ..."
// naming the problem, no new output file and an old one untouched.

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli_errors_fixture.h"
#include "cli_runner.h"
#include "sacplan/planner/plan_io/profile.h"
#include "sacplan/planner/search/reserved_budget.h"
#include "sacplan/planner/memory/simulator.h"
#include "sacplan/planner/search/solver.h"

namespace sacplan::testing {
namespace {

namespace fs = std::filesystem;

TEST_F(CliErrors, MalformedJsonProfile) {
  fs::path bad = dir_this_ / "malformed.json";
  WriteText(bad, "{\"schema\": \"sacplan.profile/1\", \"blocks\": [}\n");
  ExpectRejectedWithOutput(PlanFull(bad), "malformed.json");
}

TEST_F(CliErrors, TruncatedJsonProfile) {
  std::string text = ReadText(Profile("wan-tiny"));
  fs::path bad = dir_this_ / "truncated.json";
  WriteText(bad, text.substr(0, text.size() / 2));
  ExpectRejectedWithOutput(PlanFull(bad), "truncated.json");
}

TEST_F(CliErrors, WrongFieldType) {
  fs::path bad = EditedProfile([](nlohmann::json& doc) {
    doc["blocks"][0]["ops"][0]["fwd_ms"] = "fast";
  });
  ExpectRejectedWithOutput(PlanFull(bad), "blocks[0].ops[0].fwd_ms");
}

TEST_F(CliErrors, NegativeSize) {
  fs::path bad = EditedProfile([](nlohmann::json& doc) {
    doc["blocks"][1]["ops"][2]["outputs"][0]["bytes"] = -4096;
  });
  ExpectRejectedWithOutput(PlanFull(bad), "blocks[1].ops[2].outputs[0].bytes");
}

TEST_F(CliErrors, ZeroSize) {
  fs::path bad = EditedProfile([](nlohmann::json& doc) {
    doc["blocks"][0]["ops"][0]["outputs"][0]["bytes"] = 0;
  });
  ExpectRejectedWithOutput(PlanFull(bad), "blocks[0].ops[0].outputs[0].bytes");
}

TEST_F(CliErrors, CycleInOpGraph) {
  std::string op_id;
  fs::path bad = EditedProfile([&op_id](nlohmann::json& doc) {
    // Op 0 reads what op 1 produces: op 1 then depends on op 0 and back.
    nlohmann::json& ops = doc["blocks"][0]["ops"];
    op_id = ops[0]["id"].get<std::string>();
    ops[0]["inputs"].push_back(ops[1]["outputs"][0]["id"]);
  });
  ExpectRejectedWithOutput(PlanFull(bad), "cycle");
  ExpectRejected({"simulate", "--profile", bad.string(), "--plan",
                  TinyPlan().string()},
                 op_id);
}

TEST_F(CliErrors, UnknownPreset) {
  ExpectRejectedWithOutput({"plan", "--profile", Profile("wan-tiny").string(),
                            "--preset", "every_other_tuesday"},
                           "every_other_tuesday");
}

TEST_F(CliErrors, BudgetBelowTheMinimumNamesTheSmallestFeasible) {
  absl::StatusOr<sacplan::Profile> profile =
      ReadProfileFile(Profile("wan-tiny").string());
  ASSERT_TRUE(profile.ok()) << profile.status();
  absl::StatusOr<AnalyzedModel> model = AnalyzeModel(profile->model);
  ASSERT_TRUE(model.ok());
  absl::StatusOr<Solver> solver = Solver::Create(*model, {});
  ASSERT_TRUE(solver.ok());
  const std::string min_peak = std::to_string(solver->MinPeakBytes());
  ExpectRejectedWithOutput({"plan", "--profile", Profile("wan-tiny").string(),
                            "--budget", "1KB"},
                           min_peak);
}

TEST_F(CliErrors, ReservedBudgetBelowTheMinimumNamesTheSmallestFeasible) {
  absl::StatusOr<sacplan::Profile> profile =
      ReadProfileFile(Profile("wan-tiny").string());
  ASSERT_TRUE(profile.ok()) << profile.status();
  absl::StatusOr<AnalyzedModel> model = AnalyzeModel(profile->model);
  ASSERT_TRUE(model.ok());
  absl::StatusOr<Solver> solver = Solver::Create(*model, {});
  ASSERT_TRUE(solver.ok());
  // The least-peak plan's reserved peak, replayed here on its own.
  absl::StatusOr<AllocatorStats> least = ReplayPlan(
      *model, solver->Solve(solver->MinPeakBytes())->masks, Semantics::kSacplan);
  ASSERT_TRUE(least.ok());
  const int64_t smallest = least->reserved_peak_bytes;
  ExpectRejectedWithOutput({"plan", "--profile", Profile("wan-tiny").string(), "--budget",
                            std::to_string(smallest - 1), "--budget-kind", "reserved"},
                           std::to_string(smallest) + " bytes or more");
  CliResult r = RunSacplan({"plan", "--profile", Profile("wan-tiny").string(), "--budget",
                            std::to_string(smallest), "--budget-kind", "reserved", "-o",
                            (dir_this_ / "fits.json").string()},
                           dir_this_);
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(CliErrors, UnknownBudgetKind) {
  ExpectRejectedWithOutput({"plan", "--profile", Profile("wan-tiny").string(), "--budget",
                            "1GB", "--budget-kind", "peak"},
                           "--budget-kind: unknown budget kind 'peak'");
  nlohmann::json plan = ReadJson(TinyPlan());
  plan["budget_kind"] = "peak";
  fs::path bad = dir_this_ / "edited_plan.json";
  WriteJson(bad, plan);
  ExpectRejected({"simulate", "--profile", Profile("wan-tiny").string(), "--plan",
                  bad.string()},
                 "budget_kind");
}

TEST_F(CliErrors, BudgetThatIsNotASize) {
  ExpectRejectedWithOutput({"plan", "--profile", Profile("wan-tiny").string(),
                            "--budget", "lots"},
                           "lots");
  ExpectRejected({"compare", "--profile", Profile("wan-tiny").string(),
                  "--budget", "-3GB"},
                 "-3GB");
}

TEST_F(CliErrors, UnknownModel) {
  ExpectRejectedWithOutput({"profile", "--model", "wan9-900b"}, "wan9-900b");
}

TEST_F(CliErrors, BadModelOverride) {
  ExpectRejectedWithOutput({"profile", "--model", "wan-tiny", "--layers", "0"},
                           "layers");
  ExpectRejectedWithOutput({"profile", "--model", "wan-tiny", "--tokens", "96",
                            "--frames", "5", "--height", "32", "--width", "32"},
                           "--tokens");
  ExpectRejectedWithOutput({"profile", "--model", "wan-tiny", "--frames", "6",
                            "--height", "32", "--width", "32"},
                           "--frames");
}

TEST_F(CliErrors, CalibrationNeedsARooflineTargetAndAUsableProfile) {
  const std::string tiny = Profile("wan-tiny").string();
  ExpectRejectedWithOutput({"profile", "--model", "wan-tiny", "--device", "cpu",
                            "--calibrate-from", tiny},
                           MeasuredDeviceNeedle("--calibrate-from"));
  ExpectRejectedWithOutput({"profile", "--model", "wan-tiny", "--calibrate-from",
                            (dir_this_ / "absent.json").string()},
                           "absent.json");
  const fs::path no_config =
      EditedProfile([](nlohmann::json& doc) { doc["model"].erase("config"); });
  ExpectRejectedWithOutput(
      {"profile", "--model", "wan-tiny", "--calibrate-from", no_config.string()},
      "model.config");
  const fs::path no_costs = EditedProfile([](nlohmann::json& doc) {
    for (auto& op : doc["blocks"][0]["ops"]) {
      op.erase("flops");
      op.erase("bytes_moved");
    }
  });
  ExpectRejectedWithOutput(
      {"profile", "--model", "wan-tiny", "--calibrate-from", no_costs.string()},
      "bytes_moved");
}

// Without a GPU `--device cuda` is one line naming the missing device; in a
// build without LibTorch, one line naming LibTorch. On a machine with an
// NVIDIA driver it would measure instead: the GPU check (scripts/gpu-check.sh)
// covers that.
TEST_F(CliErrors, CudaDeviceWithoutAGpu) {
  if (fs::exists("/dev/nvidiactl")) GTEST_SKIP() << "this machine has an NVIDIA driver";
  for (const char* device : {"cuda", "cuda:0", "cupti"}) {
    ExpectRejectedWithOutput({"profile", "--model", "wan-tiny", "--device", device},
                             MeasuredDeviceNeedle("no CUDA device"));
  }
}

TEST_F(CliErrors, CudaDeviceIndexNotANumber) {
  ExpectRejectedWithOutput({"profile", "--model", "wan-tiny", "--device", "cuda:x"},
                           "cuda:x");
}

// The roofline models ATen's ops and the CPU profiler measures them: fused
// kernels are refused there; an unknown implementation is refused anywhere.
TEST_F(CliErrors, FusedKernelsNeedAMeasuredCudaProfile) {
  ExpectRejectedWithOutput({"profile", "--model", "wan-tiny", "--device", "h100",
                            "--kernels", "fused"},
                           "--kernels fused");
  ExpectRejectedWithOutput({"profile", "--model", "wan-tiny", "--device", "cpu",
                            "--kernels", "fused"},
                           MeasuredDeviceNeedle("--kernels fused"));
  ExpectRejectedWithOutput({"profile", "--model", "wan-tiny", "--kernels", "triton"},
                           "--kernels");
}

TEST_F(CliErrors, PlanForAnotherModel) {
  ExpectRejected({"simulate", "--profile", Profile("llama-tiny").string(),
                  "--plan", TinyPlan().string()},
                 "wan-tiny");
}

TEST_F(CliErrors, PlanOpIdNotInModel) {
  nlohmann::json plan = ReadJson(TinyPlan());
  plan["blocks"][1]["save"].push_back("self_attn.not_an_op");
  fs::path bad = dir_this_ / "edited_plan.json";
  WriteJson(bad, plan);
  ExpectRejected({"simulate", "--profile", Profile("wan-tiny").string(),
                  "--plan", bad.string()},
                 "self_attn.not_an_op");
}

TEST_F(CliErrors, OffloadWithoutAHostLinkOrABadHostBudget) {
  const fs::path unlinked =
      EditedProfile([](nlohmann::json& doc) { doc["device"].erase("host_link"); });
  ExpectRejectedWithOutput({"plan", "--profile", unlinked.string(), "--budget", "1GB",
                            "--host-budget", "auto"},
                           "host link");
  ExpectRejectedWithOutput({"plan", "--profile", Profile("wan-tiny").string(), "--budget",
                            "1GB", "--host-budget", "lots"},
                           "--host-budget");
}

TEST_F(CliErrors, OffloadPlansTheCommandsCannotApply) {
  // An offloading plan against a profile without a host link, and one
  // offloading an op it does not save.
  nlohmann::json plan = ReadJson(TinyPlan());
  plan["schema"] = "sacplan.plan/2";
  plan["blocks"][0]["offload"] = {"x"};
  const fs::path offloading = dir_this_ / "offloading_plan.json";
  WriteJson(offloading, plan);
  const fs::path unlinked =
      EditedProfile([](nlohmann::json& doc) { doc["device"].erase("host_link"); });
  ExpectRejected({"simulate", "--profile", unlinked.string(), "--plan", offloading.string()},
                 "no host link");
  plan["blocks"][0]["offload"] = {"self_attn.q"};
  plan["blocks"][0]["save"] = nlohmann::json::array();
  WriteJson(offloading, plan);
  ExpectRejected({"simulate", "--profile", Profile("wan-tiny").string(), "--plan",
                  offloading.string()},
                 "not saved");
  plan["schema"] = "sacplan.plan/1";
  WriteJson(offloading, plan);
  ExpectRejected({"simulate", "--profile", Profile("wan-tiny").string(), "--plan",
                  offloading.string()},
                 "offload");
}

TEST_F(CliErrors, UnknownSemantics) {
  ExpectRejectedWithOutput({"plan", "--profile", Profile("wan-tiny").string(),
                            "--budget", "1GB", "--semantics", "lazy"},
                           "lazy");
}

TEST_F(CliErrors, CommandLineMistakes) {
  ExpectRejected({"plan", "--profile", Profile("wan-tiny").string(),
                  "--preset", "full", "-o", (dir_this_ / "x.json").string(),
                  "--bogus-flag"},
                 "--bogus-flag");
  ExpectRejected({"plan", "--preset", "full", "-o",
                  (dir_this_ / "x.json").string()},
                 "--profile");
  ExpectRejected({"no-such-command"}, "no-such-command");
  EXPECT_FALSE(fs::exists(dir_this_ / "x.json"));
}

TEST_F(CliErrors, MissingProfileFile) {
  ExpectRejectedWithOutput(PlanFull(dir_this_ / "nowhere.json"), "nowhere.json");
}

}  // namespace
}  // namespace sacplan::testing
