#include "sacplan/planner/ir/bytes.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace sacplan {

absl::StatusOr<int64_t> ParseBytes(const std::string& text) {
  const std::string trimmed(absl::StripAsciiWhitespace(text));
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad byte size '", text, "': ", why,
                     " (examples: 29GiB, 28.9GB, 512MiB, 31000000000)"));
  };
  if (trimmed.empty()) return bad("empty");
  const char* begin = trimmed.c_str();
  char* end = nullptr;
  const double number = std::strtod(begin, &end);
  if (end == begin) return bad("no number");
  std::string unit = absl::AsciiStrToLower(absl::StripAsciiWhitespace(end));
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1.0},          {"b", 1.0},
      {"kb", 1e3},        {"mb", 1e6},
      {"gb", 1e9},        {"tb", 1e12},
      {"kib", 1024.0},    {"mib", 1048576.0},
      {"gib", 1073741824.0}, {"tib", 1099511627776.0},
  };
  for (const auto& [name, scale] : kUnits) {
    if (unit != name) continue;
    const double bytes = number * scale;
    if (!std::isfinite(bytes) || bytes < 1.0) return bad("must be positive");
    if (bytes > 9.0e18) return bad("too large");
    return static_cast<int64_t>(std::llround(bytes));
  }
  return bad(absl::StrCat("unknown unit '", unit, "'"));
}

std::string FormatBytes(int64_t bytes) {
  char buffer[32];
  const double value = static_cast<double>(bytes);
  if (std::fabs(value) >= 1e9) {
    std::snprintf(buffer, sizeof buffer, "%.2f GB", value / 1e9);
  } else if (std::fabs(value) >= 1e6) {
    std::snprintf(buffer, sizeof buffer, "%.2f MB", value / 1e6);
  } else if (std::fabs(value) >= 1e3) {
    std::snprintf(buffer, sizeof buffer, "%.2f kB", value / 1e3);
  } else {
    std::snprintf(buffer, sizeof buffer, "%lld B", static_cast<long long>(bytes));
  }
  return buffer;
}

}  // namespace sacplan
