// Writing output files so that readers never see half of one.
#ifndef SACPLAN_PLANNER_PLAN_IO_ATOMIC_FILE_H_
#define SACPLAN_PLANNER_PLAN_IO_ATOMIC_FILE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sacplan {

// Writes `contents` to a temporary file beside `path`, flushes it and renames
// it over `path`. On failure `path` is untouched and the temporary is
// removed; the error names the path. A `path` that exists and is not a
// regular file (a directory, device, FIFO or socket) is refused before
// anything is written. Temporary names are short, so that any final name
// the file system accepts works.
absl::Status WriteFileAtomically(const std::string& path,
                                 const std::string& contents);

// Several outputs of one command, all or none. Every destination is checked
// first (as above, and no two may name the same file); then each is written
// to a flushed temporary beside its path, and only when every temporary is
// complete are they renamed over their paths, in order. When anything fails
// no path is left changed and no temporary is left: should a rename fail
// (which needs the directory to change under us), the files already
// renamed over are put back as they were. The error names the path.
absl::Status WriteFilesAtomically(
    const std::vector<std::pair<std::string, std::string>>& files);

// Reads a whole file; NotFound or InvalidArgument naming the path.
absl::StatusOr<std::string> ReadFile(const std::string& path);

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_PLAN_IO_ATOMIC_FILE_H_
