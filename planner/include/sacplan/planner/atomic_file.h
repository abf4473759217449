// Writing output files so that readers never see half of one.
#ifndef SACPLAN_PLANNER_ATOMIC_FILE_H_
#define SACPLAN_PLANNER_ATOMIC_FILE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sacplan {

// Writes `contents` to a temporary file beside `path`, flushes it and renames
// it over `path`. On failure `path` is untouched and the temporary is
// removed; the error names the path.
absl::Status WriteFileAtomically(const std::string& path,
                                 const std::string& contents);

// Several outputs of one command, all or none: each is written to a
// flushed temporary beside its path, and only when every temporary is
// complete are they renamed over their paths, in order. When a write fails
// no path is touched and no temporary is left; the error names the path.
// (Only a failing rename, which within one directory needs the directory
// to change under us, can leave the earlier paths replaced.)
absl::Status WriteFilesAtomically(
    const std::vector<std::pair<std::string, std::string>>& files);

// Reads a whole file; NotFound or InvalidArgument naming the path.
absl::StatusOr<std::string> ReadFile(const std::string& path);

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_ATOMIC_FILE_H_
