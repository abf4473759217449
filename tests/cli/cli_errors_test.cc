// Bad input never crashes sacplan and never leaves a partial file: each case
// ends with exit status 2, exactly one stderr line "sacplan: error: ..."
// naming the problem, no new output file and an old one untouched.
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli_runner.h"
#include "sacplan/planner/profile.h"
#include "sacplan/planner/reserved_budget.h"
#include "sacplan/planner/simulator.h"
#include "sacplan/planner/solver.h"

namespace sacplan::testing {
namespace {

namespace fs = std::filesystem;

class CliErrors : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(FreshDir("errors_shared"));
    for (const char* model : {"wan-tiny", "llama-tiny"}) {
      CliResult r = RunSacplan({"profile", "--model", model, "--device",
                                "h100", "-o", Profile(model).string()},
                               *dir_);
      ASSERT_EQ(r.exit_code, 0) << r.err;
    }
    CliResult r = RunSacplan({"plan", "--profile", Profile("wan-tiny").string(),
                              "--preset", "full", "-o",
                              TinyPlan().string()},
                             *dir_);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() { delete dir_; }

  static fs::path Profile(const std::string& model) {
    return *dir_ / (model + ".json");
  }
  static fs::path TinyPlan() { return *dir_ / "wan-tiny-plan.json"; }

  void SetUp() override {
    dir_this_ = FreshDir(
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }

  // A copy of the wan-tiny profile with `edit` applied, written to the
  // test's directory.
  template <typename Edit>
  fs::path EditedProfile(Edit edit) {
    nlohmann::json doc = ReadJson(Profile("wan-tiny"));
    edit(doc);
    fs::path path = dir_this_ / "edited_profile.json";
    WriteJson(path, doc);
    return path;
  }

  // Runs `args` + "-o <new file>" and `args` + "-o <existing file>" and
  // checks both are rejected cleanly with a message containing `needle`.
  void ExpectRejectedWithOutput(const std::vector<std::string>& args,
                                const std::string& needle) {
    fs::path fresh = dir_this_ / "out_new.json";
    std::vector<std::string> with_fresh = args;
    with_fresh.insert(with_fresh.end(), {"-o", fresh.string()});
    ExpectRejected(with_fresh, needle);
    EXPECT_FALSE(fs::exists(fresh)) << "partial output left behind";

    fs::path existing = dir_this_ / "out_existing.json";
    WriteText(existing, "previous contents\n");
    std::vector<std::string> with_existing = args;
    with_existing.insert(with_existing.end(), {"-o", existing.string()});
    ExpectRejected(with_existing, needle);
    EXPECT_EQ(ReadText(existing), "previous contents\n");
    // No temporary file beside the output survives either.
    int entries = 0;
    for (const auto& entry : fs::directory_iterator(dir_this_)) {
      (void)entry;
      ++entries;
    }
    EXPECT_LE(entries, 2) << "stray files in " << dir_this_;
  }

  void ExpectRejected(const std::vector<std::string>& args,
                      const std::string& needle) {
    CliResult r = RunSacplan(args, dir_this_);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(LineCount(r.err), 1) << r.err;
    EXPECT_EQ(r.err.rfind("sacplan: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos)
        << "'" << needle << "' not named in: " << r.err;
    EXPECT_EQ(r.out, "");
  }

  // What a `profile --device cpu|cuda` line is rejected for: `with_torch`
  // where sacplan-torch runs it, LibTorch itself in a build without it.
  static std::string MeasuredDeviceNeedle(const std::string& with_torch) {
#ifdef SACPLAN_TESTS_HAVE_TORCH
    return with_torch;
#else
    (void)with_torch;
    return "needs LibTorch";
#endif
  }

  std::vector<std::string> PlanFull(const fs::path& profile) {
    return {"plan", "--profile", profile.string(), "--preset", "full"};
  }

  static fs::path* dir_;
  fs::path dir_this_;
};

fs::path* CliErrors::dir_ = nullptr;

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
                           "--budget-kind");
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

// Hardened inputs (issue 11): each class of malformed input that once
// wrapped, overflowed, hung or crashed gets one line and exit status 2.

TEST_F(CliErrors, SizeProductThatOverflowsInt64) {
  // batch*tokens*max(dim,ffn)*16 = 2^20 * 2^32 * 2^7 * 2^4 = 2^63: it once
  // wrapped to a small or negative byte count and was accepted.
  ExpectRejectedWithOutput({"profile", "--model", "wan-tiny", "--tokens",
                            "4294967296", "--batch", "1048576"},
                           "batch*tokens*max(dim,ffn)*16 bytes overflows int64");
  fs::path config = dir_this_ / "huge.json";
  WriteText(config, R"({"base": "llama-tiny", "vocab": 4294967296, "tokens": 4294967296})");
  ExpectRejected({"profile", "--model-config", config.string(), "-o",
                  (dir_this_ / "p.json").string()},
                 "huge.json: ");
  EXPECT_FALSE(fs::exists(dir_this_ / "p.json"));
}

TEST_F(CliErrors, SizeAboveItsLimitNamesTheKey) {
  ExpectRejectedWithOutput({"profile", "--model", "wan-tiny", "--layers", "1000000000"},
                           "'layers'");
}

TEST_F(CliErrors, ByteCountAboveInt64MaxIsNotWrapped) {
  // 2^64 - 4096 read into an int64 was -4096.
  fs::path bad = EditedProfile([](nlohmann::json& doc) {
    doc["blocks"][0]["ops"][1]["outputs"][0]["bytes"] = uint64_t{18446744073709547520u};
  });
  ExpectRejectedWithOutput(PlanFull(bad), "blocks[0].ops[1].outputs[0].bytes");
}

TEST_F(CliErrors, FloatWhereAnIntegerBelongs) {
  fs::path bad = EditedProfile([](nlohmann::json& doc) {
    doc["fixed"]["param_bytes"] = 4096.0;
  });
  ExpectRejectedWithOutput(PlanFull(bad), "fixed.param_bytes: must be an integer");
}

TEST_F(CliErrors, TimeThatOverflowsToInfinity) {
  fs::path huge = EditedProfile([](nlohmann::json& doc) {
    doc["blocks"][2]["ops"][3]["fwd_ms"] = 1e308;
  });
  ExpectRejectedWithOutput(PlanFull(huge), "blocks[2].ops[3].fwd_ms");
  fs::remove(huge);
  fs::path inf = dir_this_ / "inf.json";
  std::string text = ReadText(Profile("wan-tiny"));
  const size_t at = text.find("\"bwd_ms\":");
  ASSERT_NE(at, std::string::npos);
  text.insert(at, "\"bwd_ms\": 1e999, \"was\": ");
  WriteText(inf, text);
  ExpectRejectedWithOutput(PlanFull(inf), "inf.json: a number is too large");
}

TEST_F(CliErrors, JsonNestedTooDeep) {
  fs::path deep = dir_this_ / "deep.json";
  WriteText(deep, "{\"schema\": " + std::string(100000, '[') +
                      std::string(100000, ']') + "}");
  ExpectRejectedWithOutput(PlanFull(deep), "deep.json: JSON nested deeper than 64");
  fs::remove(deep);
  fs::path deep_config = dir_this_ / "deep_config.json";
  WriteText(deep_config, std::string(100000, '{'));
  ExpectRejectedWithOutput({"profile", "--model-config", deep_config.string()},
                           "deep_config.json: JSON nested deeper than 64");
}

TEST_F(CliErrors, FileLargerThanTheLimit) {
  fs::path big = dir_this_ / "big.json";
  {
    std::ofstream out(big, std::ios::binary);
    out << "[" << std::string((64 << 20) + 1, ' ') << "]";
  }
  ExpectRejectedWithOutput(PlanFull(big), "larger than the limit");
  fs::remove(big);
}

TEST_F(CliErrors, PointsBounded) {
  // 10^8 solves never returned.
  ExpectRejectedWithOutput({"frontier", "--profile", Profile("wan-tiny").string(),
                            "--points", "100000000"},
                           "--points 100000000: must be between 2 and 1000");
  ExpectRejectedWithOutput({"report", "--profile", Profile("wan-tiny").string(),
                            "--budget", "1GB", "--points", "1001"},
                           "--points 1001");
}

TEST_F(CliErrors, IndexTruncatedToThirtyTwoBits) {
  // 2^32 + 1 truncated to int was 1, a valid index.
  nlohmann::json plan = ReadJson(TinyPlan());
  plan["blocks"][1]["index"] = int64_t{4294967297};
  fs::path bad = dir_this_ / "edited_plan.json";
  WriteJson(bad, plan);
  ExpectRejected({"simulate", "--profile", Profile("wan-tiny").string(),
                  "--plan", bad.string()},
                 "blocks[1].index");
  fs::remove(bad);
  fs::path profile = EditedProfile([](nlohmann::json& doc) {
    doc["blocks"][1]["index"] = int64_t{4294967297};
  });
  ExpectRejectedWithOutput(PlanFull(profile), "blocks[1].index");
}

TEST_F(CliErrors, ReportWritesAllOutputsOrNone) {
  fs::path html = dir_this_ / "report.html";
  ExpectRejected({"report", "--profile", Profile("wan-tiny").string(), "--budget",
                  "1GB", "-o", html.string(), "--snapshot",
                  (dir_this_ / "no_such_dir" / "snapshot.json").string()},
                 "snapshot.json");
  EXPECT_FALSE(fs::exists(html)) << "report.html written although --snapshot failed";
  int entries = 0;
  for (const auto& entry : fs::directory_iterator(dir_this_)) {
    ADD_FAILURE() << "left behind: " << entry.path();
    ++entries;
  }
  EXPECT_EQ(entries, 0);
}

TEST_F(CliErrors, EmptySemantics) {
  ExpectRejectedWithOutput({"plan", "--profile", Profile("wan-tiny").string(),
                            "--budget", "1GB", "--semantics", ""},
                           "--semantics ''");
  ExpectRejected({"simulate", "--profile", Profile("wan-tiny").string(), "--plan",
                  TinyPlan().string(), "--semantics", ""},
                 "--semantics ''");
}

TEST_F(CliErrors, PlanForAnotherModelWithItsNameEdited) {
  fs::path llama_plan = dir_this_ / "llama_plan.json";
  CliResult made = RunSacplan({"plan", "--profile", Profile("llama-tiny").string(),
                               "--preset", "full", "-o", llama_plan.string()},
                              dir_this_);
  ASSERT_EQ(made.exit_code, 0) << made.err;
  // "full" saves no op, so no op id gives it away: the model config does.
  nlohmann::json plan = ReadJson(llama_plan);
  plan["model"] = "wan-tiny";
  fs::path renamed = dir_this_ / "renamed.json";
  WriteJson(renamed, plan);
  ExpectRejected({"simulate", "--profile", Profile("wan-tiny").string(), "--plan",
                  renamed.string()},
                 "plan is for another model: model_config.");
  // Without its model config, the graph fingerprint does.
  plan.erase("model_config");
  WriteJson(renamed, plan);
  ExpectRejected({"simulate", "--profile", Profile("wan-tiny").string(), "--plan",
                  renamed.string()},
                 "plan is for another op graph");
  ExpectRejected({"report", "--profile", Profile("wan-tiny").string(), "--plan",
                  renamed.string(), "-o", (dir_this_ / "r.html").string()},
                 "plan is for another op graph");
  EXPECT_FALSE(fs::exists(dir_this_ / "r.html"));
}

// Issue 9's bad input: a split the model or the job cannot make.
TEST_F(CliErrors, ParallelFlagsThatCannotSplitTheJobOrTheModel) {
  const std::vector<std::string> wan14 = {"profile", "--model", "wan2.1-14b",
                                          "--device", "h100"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = wan14;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  // 40 heads: 6 ranks of sequence parallel cannot share them.
  ExpectRejectedWithOutput(with({"--world-size", "6", "--sp", "6"}), "heads (40)");
  // 75,604 tokens split 4 ways, not 8.
  ExpectRejectedWithOutput(with({"--tokens", "75604", "--world-size", "8", "--sp", "8"}),
                           "tokens (75604)");
  ExpectRejectedWithOutput(with({"--world-size", "4", "--sp", "8"}),
                           "--sp: must be in [1, --world-size (4)], got 8");
  ExpectRejectedWithOutput(with({"--world-size", "8", "--sp", "3"}),
                           "--sp: must divide --world-size (8), got 3");
  ExpectRejectedWithOutput(with({"--fsdp"}), "--fsdp: needs --world-size 2 or more");
  ExpectRejectedWithOutput(with({"--world-size", "1", "--fsdp"}), "--fsdp");
  ExpectRejectedWithOutput(with({"--world-size", "0"}), "--world-size");
  // LLaMA-3 8B has 8 KV heads: 16-way Ulysses cannot split them.
  ExpectRejectedWithOutput({"profile", "--model", "llama3-8b", "--device", "h100",
                            "--world-size", "16", "--sp", "16"},
                           "kv_heads (8)");
}

TEST_F(CliErrors, ProfileFsdpFieldsThatBreakTheRules) {
  ExpectRejectedWithOutput(PlanFull(EditedProfile([](nlohmann::json& doc) {
                             doc["parallel"] = {{"world_size", 4}, {"sp", 8}};
                           })),
                           "parallel.sp");
  ExpectRejectedWithOutput(PlanFull(EditedProfile([](nlohmann::json& doc) {
                             doc["parallel"] = {{"world_size", 2}, {"fsdp", true}};
                           })),
                           "blocks[0].fsdp: missing");
}

}  // namespace
}  // namespace sacplan::testing
