#include "sacplan/planner/ir/bytes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace sacplan {
namespace {

TEST(ParseBytesTest, ReadsDecimalAndBinaryUnits) {
  EXPECT_EQ(*ParseBytes("29GiB"), int64_t{29} << 30);
  EXPECT_EQ(*ParseBytes("28.9GB"), int64_t{28'900'000'000});
  EXPECT_EQ(*ParseBytes("512MiB"), int64_t{512} << 20);
  EXPECT_EQ(*ParseBytes("25MB"), 25'000'000);
  EXPECT_EQ(*ParseBytes("3kB"), 3000);
  EXPECT_EQ(*ParseBytes("2KiB"), 2048);
  EXPECT_EQ(*ParseBytes("1TiB"), int64_t{1} << 40);
  EXPECT_EQ(*ParseBytes("2TB"), int64_t{2'000'000'000'000});
  EXPECT_EQ(*ParseBytes("31000000000"), int64_t{31'000'000'000});
  EXPECT_EQ(*ParseBytes("1.5e10"), int64_t{15'000'000'000});
  EXPECT_EQ(*ParseBytes("7b"), 7);
}

TEST(ParseBytesTest, IgnoresUnitCaseAndSurroundingSpace) {
  EXPECT_EQ(*ParseBytes("2gb"), int64_t{2'000'000'000});
  EXPECT_EQ(*ParseBytes("2 GIB"), int64_t{2} << 30);
  EXPECT_EQ(*ParseBytes("  40GB \n"), int64_t{40'000'000'000});
}

TEST(ParseBytesTest, RoundsFractionalBytesToTheNearest) {
  EXPECT_EQ(*ParseBytes("1.0000004kB"), 1000);
  EXPECT_EQ(*ParseBytes("1.0006kB"), 1001);
}

TEST(ParseBytesTest, RejectsTextThatIsNotAPositiveSize) {
  struct Bad {
    const char* text;
    const char* why;
  };
  for (const Bad& bad : {Bad{"", "empty"}, Bad{"   ", "empty"}, Bad{"GB", "no number"},
                         Bad{"lots", "no number"}, Bad{"0", "must be positive"},
                         Bad{"-1GB", "must be positive"}, Bad{"0.4", "must be positive"},
                         Bad{"5XB", "unknown unit 'xb'"}, Bad{"5 G B", "unknown unit"},
                         Bad{"1e30", "too large"}, Bad{"inf", "must be positive"}}) {
    const absl::StatusOr<int64_t> parsed = ParseBytes(bad.text);
    ASSERT_FALSE(parsed.ok()) << "'" << bad.text << "' gave " << *parsed;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string message(parsed.status().message());
    EXPECT_NE(message.find(bad.why), std::string::npos) << message;
    EXPECT_NE(message.find(std::string("'") + bad.text + "'"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(FormatBytesTest, PicksTheLargestDecimalUnitWithTwoDecimals) {
  EXPECT_EQ(FormatBytes(28'930'000'000), "28.93 GB");
  EXPECT_EQ(FormatBytes(1'000'000'000), "1.00 GB");
  EXPECT_EQ(FormatBytes(20'414'000), "20.41 MB");
  EXPECT_EQ(FormatBytes(1'500), "1.50 kB");
  EXPECT_EQ(FormatBytes(999), "999 B");
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(-2'000'000'000), "-2.00 GB");
}

TEST(FormatBytesTest, ParsesBackWithinItsRounding) {
  for (const int64_t bytes : {int64_t{1'234}, int64_t{56'789'012}, int64_t{345'678'901'234}}) {
    const int64_t back = *ParseBytes(FormatBytes(bytes));
    // Two decimals of the unit: within half of 1/100 of it.
    const double unit = bytes >= 1'000'000'000 ? 1e9 : bytes >= 1'000'000 ? 1e6 : 1e3;
    EXPECT_LE(std::abs(static_cast<double>(back - bytes)), 0.005 * unit) << bytes;
  }
}

}  // namespace
}  // namespace sacplan
