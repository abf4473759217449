// The one JSON reader of every sacplan input format (profile.json,
// plan.json, model config files, run logs): bounded parsing and strict
// field readers. Limits and rules: docs/profile_format.md#limits.
//
// Every error is InvalidArgument (NotFound for a file that cannot be
// opened) with a one-line message that names the field's path, e.g.
// "blocks[3].ops[7].fwd_ms: expected a finite number >= 0, got -1".
#ifndef SACPLAN_PLANNER_PLAN_IO_JSON_READER_H_
#define SACPLAN_PLANNER_PLAN_IO_JSON_READER_H_

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sacplan::json_reader {

using nlohmann::json;

// Largest input file read (64 MiB): a 30-block profile is about 0.5 MiB, so
// this leaves room for models 100x larger while bounding memory and time.
inline constexpr int64_t kMaxFileBytes = int64_t{64} << 20;
// Deepest nesting of arrays and objects accepted. The formats need 5; a
// bound keeps recursive consumers (dump, comparisons) off the stack limit.
inline constexpr int kMaxDepth = 64;
// Largest byte count any field may hold (2^53, exact as a double too):
// 8 PiB, far above any device.
inline constexpr int64_t kMaxBytes = int64_t{1} << 53;
// Largest time any field may hold, in milliseconds (about 31 years), so that
// sums over a whole step stay finite.
inline constexpr double kMaxMs = 1e12;

// Closed range an integer field must lie in.
struct IntRange {
  int64_t min = std::numeric_limits<int64_t>::min();
  int64_t max = std::numeric_limits<int64_t>::max();
};
// Byte counts: 0..kMaxBytes.
inline constexpr IntRange kByteRange{0, kMaxBytes};
// Indices and counts stored in an int: 0..INT32_MAX.
inline constexpr IntRange kIndexRange{0, std::numeric_limits<int32_t>::max()};

// Closed range a number field must lie in; numbers are always finite.
struct NumberRange {
  double min = -std::numeric_limits<double>::max();
  double max = std::numeric_limits<double>::max();
};
// Times in milliseconds: 0..kMaxMs.
inline constexpr NumberRange kTimeRange{0, kMaxMs};
// Non-negative finite amounts (FLOPs, bytes moved as a double).
inline constexpr NumberRange kNonNegative{0, std::numeric_limits<double>::max()};

// "<path>: <what>" as InvalidArgument; a path of "" gives just `what`.
absl::Status Error(const std::string& path, const std::string& what);
absl::Status WrongType(const std::string& path, const char* expected,
                       const json& got);
// "<path>.<key>", or `key` alone when `path` is empty.
std::string Join(const std::string& path, const std::string& key);

// Object member `key` of `object`, or nullptr when absent. `object` must
// already be known to be an object.
const json* Find(const json& object, const std::string& key);

absl::Status RequireObject(const json& value, const std::string& path);
absl::Status RequireArray(const json& value, const std::string& path);

// Value converters; `path` names the value in errors.
// An integer must be a JSON integer (3, not 3.0 or 3e0) within `range`;
// integers above INT64_MAX are out of range, never wrapped.
absl::Status AsInt(const json& value, const std::string& path, IntRange range,
                   int64_t& out);
// Any JSON number, finite and within `range`.
absl::Status AsNumber(const json& value, const std::string& path,
                      NumberRange range, double& out);
absl::Status AsString(const json& value, const std::string& path,
                      std::string& out);

// Field readers: `object[key]` converted as above, with path
// "<path>.<key>". `required` false leaves `out` unchanged when the key is
// absent; `required` true makes absence "<path>.<key>: missing".
absl::Status ReadString(const json& object, const std::string& key,
                        const std::string& path, bool required, std::string& out);
absl::Status ReadInt(const json& object, const std::string& key,
                     const std::string& path, bool required, int64_t& out,
                     IntRange range = {});
// ReadInt into an int: the range is intersected with int's.
absl::Status ReadInt32(const json& object, const std::string& key,
                       const std::string& path, bool required, int& out,
                       IntRange range = kIndexRange);
absl::Status ReadNumber(const json& object, const std::string& key,
                        const std::string& path, bool required, double& out,
                        NumberRange range = {});
absl::Status ReadBool(const json& object, const std::string& key,
                      const std::string& path, bool required, bool& out);
absl::Status ReadStrings(const json& object, const std::string& key,
                         const std::string& path, bool required,
                         std::vector<std::string>& out);
absl::Status ReadInts(const json& object, const std::string& key,
                      const std::string& path, bool required,
                      std::vector<int64_t>& out, IntRange range = {});

// Parses `text` as one JSON document. Errors name `what` (a file name):
// text longer than kMaxFileBytes, nesting deeper than kMaxDepth (checked
// before parsing, so no parser or consumer recursion sees it), a NUL byte
// anywhere (with what follows the document), and malformed or truncated
// text or anything after the one document, with its byte offset.
absl::StatusOr<json> Parse(std::string_view text, const std::string& what);
// Reads `path` (at most kMaxFileBytes; a larger file is an error before it
// is read) and parses it with Parse. NotFound when it cannot be opened.
absl::StatusOr<json> ReadJsonFile(const std::string& path);

}  // namespace sacplan::json_reader

#endif  // SACPLAN_PLANNER_PLAN_IO_JSON_READER_H_
