// The one JSON reader: integers exactly, finite numbers, bounded depth and
// size, and errors that name the field's path.
#include "sacplan/planner/plan_io/json_reader.h"

#include <cstdint>
#include <fstream>
#include <limits>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace sacplan::json_reader {
namespace {

using ::testing::HasSubstr;

absl::Status ReadIntFrom(const std::string& text, int64_t& out, IntRange range = {}) {
  const json doc = json::parse(text);
  return ReadInt(doc, "n", "blocks[3].ops[7]", true, out, range);
}

TEST(JsonReaderTest, IntegersMustBeJsonIntegers) {
  int64_t n = -1;
  ASSERT_TRUE(ReadIntFrom(R"({"n": 9223372036854775807})", n).ok());
  EXPECT_EQ(n, std::numeric_limits<int64_t>::max());
  ASSERT_TRUE(ReadIntFrom(R"({"n": -9223372036854775808})", n).ok());
  EXPECT_EQ(n, std::numeric_limits<int64_t>::min());
  for (const char* text : {R"({"n": 2.0})", R"({"n": 3e9})", R"({"n": 1.5})"}) {
    n = 7;
    const absl::Status s = ReadIntFrom(text, n);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(s.message(), HasSubstr("blocks[3].ops[7].n: must be an integer"));
    EXPECT_EQ(n, 7) << "a rejected value must not be stored";
  }
}

TEST(JsonReaderTest, UnsignedAboveInt64MaxIsRejectedNotWrapped) {
  int64_t n = 7;
  // 2^63 and 2^64-1 parse as uint64; cast to int64 they would be negative.
  for (const char* text : {R"({"n": 9223372036854775808})",
                           R"({"n": 18446744073709551615})"}) {
    const absl::Status s = ReadIntFrom(text, n);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(s.message(), HasSubstr("blocks[3].ops[7].n"));
  }
  EXPECT_EQ(n, 7);
}

TEST(JsonReaderTest, RangesAreInclusiveAndNamed) {
  int64_t n = 0;
  EXPECT_TRUE(ReadIntFrom(R"({"n": 9007199254740992})", n, kByteRange).ok());
  const absl::Status s = ReadIntFrom(R"({"n": 9007199254740993})", n, kByteRange);
  EXPECT_THAT(s.message(), HasSubstr("in [0, 9007199254740992]"));
  EXPECT_FALSE(ReadIntFrom(R"({"n": -1})", n, kByteRange).ok());
}

TEST(JsonReaderTest, IndicesAboveInt32AreRejectedNotTruncated) {
  // 2^32 + 1 truncated to 32 bits is 1, a valid index.
  const json doc = json::parse(R"({"index": 4294967297})");
  int index = -1;
  const absl::Status s = ReadInt32(doc, "index", "blocks[1]", true, index);
  EXPECT_THAT(s.message(), HasSubstr("blocks[1].index"));
  EXPECT_EQ(index, -1);
  ASSERT_TRUE(ReadInt32(json::parse(R"({"index": 2147483647})"), "index", "", true,
                        index)
                  .ok());
  EXPECT_EQ(index, std::numeric_limits<int32_t>::max());
}

TEST(JsonReaderTest, NumbersMustBeFiniteAndInRange) {
  double ms = -1;
  const json infinite = {{"fwd_ms", std::numeric_limits<double>::infinity()}};
  const absl::Status inf = ReadNumber(infinite, "fwd_ms", "ops[0]", true, ms, {});
  EXPECT_THAT(inf.message(), HasSubstr("ops[0].fwd_ms: must be a finite number"));
  const json nan = {{"fwd_ms", std::numeric_limits<double>::quiet_NaN()}};
  EXPECT_FALSE(ReadNumber(nan, "fwd_ms", "ops[0]", true, ms, {}).ok());
  const absl::Status huge =
      ReadNumber(json::parse(R"({"fwd_ms": 1e308})"), "fwd_ms", "ops[0]", true, ms,
                 kTimeRange);
  EXPECT_THAT(huge.message(), HasSubstr("ops[0].fwd_ms"));
  const absl::Status negative =
      ReadNumber(json::parse(R"({"fwd_ms": -0.5})"), "fwd_ms", "ops[0]", true, ms,
                 kTimeRange);
  EXPECT_FALSE(negative.ok());
  EXPECT_EQ(ms, -1);
  ASSERT_TRUE(ReadNumber(json::parse(R"({"fwd_ms": 12})"), "fwd_ms", "", true, ms,
                         kTimeRange)
                  .ok());
  EXPECT_EQ(ms, 12);
}

TEST(JsonReaderTest, MissingAndMistypedFieldsNameThePath) {
  const json doc = json::parse(R"({"s": 3, "list": ["a", 4]})");
  std::string s;
  EXPECT_EQ(ReadString(doc, "absent", "fixed", true, s).message(),
            "fixed.absent: missing");
  EXPECT_TRUE(ReadString(doc, "absent", "fixed", false, s).ok());
  EXPECT_EQ(ReadString(doc, "s", "", true, s).message(),
            "s: expected a string, got number");
  std::vector<std::string> list = {"kept"};
  EXPECT_EQ(ReadStrings(doc, "list", "b", true, list).message(),
            "b.list[1]: expected a string, got number");
  EXPECT_EQ(list, std::vector<std::string>{"kept"});
}

TEST(JsonReaderTest, ErrorsStayOnOneLineAndShort) {
  // A rejected value is shown cut short, with its newlines escaped.
  const json doc = {{"n", std::string(10000, 'x') + "\n"}};
  int64_t n = 0;
  const absl::Status s = ReadInt(doc, "n", "", true, n);
  EXPECT_EQ(std::string(s.message()).find('\n'), std::string::npos);
  const json fraction = {{"n", 0.5}};
  const absl::Status f = ReadInt(fraction, "n", "", true, n);
  EXPECT_LT(f.message().size(), 200u);
}

TEST(JsonReaderTest, DepthIsBoundedBeforeParsing) {
  const std::string ok_text = std::string(kMaxDepth, '[') + std::string(kMaxDepth, ']');
  EXPECT_TRUE(Parse(ok_text, "ok.json").ok());
  // 10^5 levels would overflow a recursive consumer's stack.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const absl::StatusOr<json> doc = Parse(deep, "deep.json");
  ASSERT_FALSE(doc.ok());
  EXPECT_THAT(doc.status().message(), HasSubstr("deep.json: JSON nested deeper than 64"));
  // Brackets inside strings, escaped quotes included, do not count.
  const std::string in_string =
      "{\"a\": \"\\\"" + std::string(1000, '[') + "\"}";
  EXPECT_TRUE(Parse(in_string, "s.json").ok());
}

TEST(JsonReaderTest, NumbersBeyondADoubleAreAnErrorNotAnException) {
  const absl::StatusOr<json> doc = Parse(R"({"fwd_ms": 1e999})", "inf.json");
  ASSERT_FALSE(doc.ok());
  EXPECT_THAT(doc.status().message(), HasSubstr("inf.json: a number is too large"));
}

TEST(JsonReaderTest, MalformedTextNamesTheFileAndOffset) {
  const absl::StatusOr<json> doc = Parse("{\"a\": [1, 2}", "bad.json");
  ASSERT_FALSE(doc.ok());
  EXPECT_THAT(doc.status().message(), HasSubstr("bad.json: not valid JSON"));
  EXPECT_THAT(doc.status().message(), HasSubstr("near byte 12"));
}

TEST(JsonReaderTest, FileSizeIsBoundedBeforeReading) {
  const std::string path = ::testing::TempDir() + "/json_reader_big.json";
  {
    std::ofstream out(path, std::ios::binary);
    out << "[";
    out << std::string(kMaxFileBytes, ' ');
    out << "]";
  }
  const absl::StatusOr<json> doc = ReadJsonFile(path);
  ASSERT_FALSE(doc.ok());
  EXPECT_THAT(doc.status().message(), HasSubstr(path));
  EXPECT_THAT(doc.status().message(), HasSubstr("larger than the limit"));
  std::remove(path.c_str());
  EXPECT_EQ(ReadJsonFile(path).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace sacplan::json_reader
