#include "sacplan/reports/run_log.h"

#include <gtest/gtest.h>

#include <fstream>
#include <limits>
#include <string>

namespace sacplan::reports {
namespace {

nlohmann::json GoodLog() {
  return {{"predicted", {{"peak_bytes", 28900000000}, {"step_ms", 3750.5}}},
          {"measured", {{"peak_bytes", 29100000000}, {"step_ms", 3801}}},
          {"losses", {1.5, 1.25, 1.0}},
          {"plan", {{"method", "optimal"}}},
          {"model", "wan2.1-1.3b"},
          {"anything_else", {{"nested", true}}}};
}

TEST(RunLogTest, ReadsTheRequiredFieldsAndIgnoresTheRest) {
  absl::StatusOr<RunLog> log = RunLogFromJson(GoodLog(), "run.json");
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_EQ(log->predicted_peak_bytes, 28900000000);
  EXPECT_DOUBLE_EQ(log->predicted_step_ms, 3750.5);
  EXPECT_EQ(log->measured_peak_bytes, 29100000000);
  EXPECT_DOUBLE_EQ(log->measured_step_ms, 3801);
  EXPECT_EQ(log->loss_count, 3);
  EXPECT_EQ(log->label, "optimal");
  EXPECT_EQ(log->path, "run.json");
}

TEST(RunLogTest, EachMissingOrMistypedFieldIsNamed) {
  struct Case {
    const char* pointer;  // JSON pointer to break
    bool remove;          // remove it, else set it to a string
    const char* message;
  };
  for (const Case& c : {
           Case{"/predicted/peak_bytes", true, "run.json: predicted.peak_bytes: missing"},
           Case{"/predicted/step_ms", false,
                "run.json: predicted.step_ms: expected a number, got string"},
           Case{"/measured/peak_bytes", true, "run.json: measured.peak_bytes: missing"},
           Case{"/measured/step_ms", true, "run.json: measured.step_ms: missing"},
           Case{"/measured", true, "run.json: measured: missing"},
           Case{"/losses", true, "run.json: losses: missing"},
           Case{"/losses", false, "run.json: losses: expected an array, got string"},
       }) {
    nlohmann::json doc = GoodLog();
    const nlohmann::json::json_pointer pointer(c.pointer);
    if (c.remove) {
      doc[pointer.parent_pointer()].erase(pointer.back());
    } else {
      doc[pointer] = "oops";
    }
    absl::StatusOr<RunLog> log = RunLogFromJson(doc, "run.json");
    ASSERT_FALSE(log.ok()) << c.pointer;
    EXPECT_EQ(std::string(log.status().message()), c.message);
  }
  nlohmann::json negative = GoodLog();
  negative["measured"]["step_ms"] = -1;
  EXPECT_EQ(RunLogFromJson(negative, "r").status().message(),
            "r: measured.step_ms: must be a finite number in [0, 1e+12], got -1");
  nlohmann::json zero = GoodLog();
  zero["measured"]["step_ms"] = 0;
  EXPECT_EQ(RunLogFromJson(zero, "r").status().message(),
            "r: measured.step_ms: must be > 0");
}

TEST(RunLogTest, PeakBytesAreExactIntegers) {
  // Once cast from a double: 1.5 became 1, 2^64 became undefined behaviour.
  for (const nlohmann::json& bad :
       {nlohmann::json(2.9e10), nlohmann::json(uint64_t{18446744073709551615u}),
        nlohmann::json(0)}) {
    nlohmann::json doc = GoodLog();
    doc["measured"]["peak_bytes"] = bad;
    absl::StatusOr<RunLog> log = RunLogFromJson(doc, "run.json");
    ASSERT_FALSE(log.ok()) << bad;
    EXPECT_EQ(log.status().message().rfind("run.json: measured.peak_bytes: ", 0), 0u)
        << log.status().message();
  }
  nlohmann::json infinite = GoodLog();
  infinite["losses"][1] = std::numeric_limits<double>::infinity();
  EXPECT_EQ(RunLogFromJson(infinite, "r").status().message().rfind("r: losses[1]: ", 0),
            0u);
}

TEST(RunLogTest, MalformedFileNamesTheFile) {
  const std::string path = ::testing::TempDir() + "/truncated_run.json";
  std::ofstream(path) << "{\"predicted\": {\"peak_bytes\": 1";
  absl::StatusOr<RunLog> log = ReadRunLog(path);
  ASSERT_FALSE(log.ok());
  EXPECT_NE(log.status().message().find(path), std::string::npos);
  EXPECT_FALSE(ReadRunLog(path + ".missing").ok());
}

}  // namespace
}  // namespace sacplan::reports
