// Writing output files so that readers never see half of one.
#ifndef SACPLAN_PLANNER_ATOMIC_FILE_H_
#define SACPLAN_PLANNER_ATOMIC_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sacplan {

// Writes `contents` to a temporary file beside `path`, flushes it and renames
// it over `path`. On failure `path` is untouched and the temporary is
// removed; the error names the path.
absl::Status WriteFileAtomically(const std::string& path,
                                 const std::string& contents);

// Reads a whole file; NotFound or InvalidArgument naming the path.
absl::StatusOr<std::string> ReadFile(const std::string& path);

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_ATOMIC_FILE_H_
