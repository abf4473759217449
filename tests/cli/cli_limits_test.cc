// Bad input that once wrapped, overflowed, hung or crashed sacplan (issue
// 11), and splits a model or a job cannot make (issue 9): each ends with
// exit status 2, one stderr line naming the problem and no file.

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
