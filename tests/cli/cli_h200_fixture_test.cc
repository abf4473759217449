// Issue 40 on the H200 fixture (tests/data/h200): `plan --host-budget auto`
// at full checkpointing's measured peak planned 125.25 GB of offload
// against a host of 135.1 GB, and training it was killed for host memory.
// Auto now plans at most kAutoHostShare of host_memory_bytes, in pinned
// bytes.
#include <cstdint>
#include <iostream>
#include <string>

#include <gtest/gtest.h>

#include "cli_runner.h"

namespace sacplan::testing {
namespace {

namespace fs = std::filesystem;

const fs::path kData = fs::path(SACPLAN_SOURCE_DIR) / "tests" / "data" / "h200";

TEST(CliH200Fixture, AutoHostBudgetAtFullsMeasuredPeakPlansHalfTheHostAtMost) {
  const fs::path dir = FreshDir("h200_auto");
  const nlohmann::json run_full = ReadJson(kData / "run_full.json");
  const int64_t full_peak_bytes = run_full.at("measured").at("peak_bytes").get<int64_t>();
  const double full_step_ms = run_full.at("measured").at("step_ms").get<double>();
  const fs::path profile = kData / "profile_full.json";
  const int64_t host_memory_bytes = ReadJson(profile)
                                        .at("device")
                                        .at("host_link")
                                        .at("host_memory_bytes")
                                        .get<int64_t>();
  const fs::path plan_path = dir / "plan.json";
  const CliResult r =
      RunSacplan({"plan", "--profile", profile.string(), "--budget",
                  std::to_string(full_peak_bytes), "--host-budget", "auto", "-o",
                  plan_path.string()},
                 dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json plan = ReadJson(plan_path);
  const nlohmann::json& predicted = plan.at("predicted");
  const int64_t host_peak_bytes = predicted.value("host_peak_bytes", int64_t{0});
  EXPECT_LE(host_peak_bytes, host_memory_bytes / 2);
  EXPECT_LE(predicted.at("peak_bytes").get<int64_t>(), full_peak_bytes);
  // Offload still pays at this budget (the solver chose it over recompute).
  EXPECT_GT(host_peak_bytes, 0);
  // The figures the issue asks for, in the test's log.
  std::cout << "h200 auto: host peak " << host_peak_bytes << " B of "
            << host_memory_bytes << " B; predicted step "
            << predicted.at("step_ms").get<double>() << " ms, full measured "
            << full_step_ms << " ms\n";
}

}  // namespace
}  // namespace sacplan::testing
