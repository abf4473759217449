// Byte quantities as people write them.
#ifndef SACPLAN_PLANNER_IR_BYTES_H_
#define SACPLAN_PLANNER_IR_BYTES_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace sacplan {

// Parses "29GiB", "28.9GB", "512MiB", "31000000000", "1.5e10" (case of the
// unit ignored; GB = 1e9, GiB = 2^30). Fails with InvalidArgument for text
// that is not a positive size.
absl::StatusOr<int64_t> ParseBytes(const std::string& text);

// "28.93 GB" (decimal units, two decimals), for tables and messages.
std::string FormatBytes(int64_t bytes);

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_IR_BYTES_H_
