#include "sacplan/planner/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace sacplan {

absl::Status WriteFileAtomically(const std::string& path,
                                 const std::string& contents) {
  std::string temp = path + ".tmpXXXXXX";
  const int fd = mkstemp(temp.data());
  if (fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  }
  size_t written = 0;
  while (written < contents.size()) {
    const ssize_t n = write(fd, contents.data() + written, contents.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string error = std::strerror(errno);
      close(fd);
      unlink(temp.c_str());
      return absl::InvalidArgumentError(
          absl::StrCat("cannot write ", path, ": ", error));
    }
    written += static_cast<size_t>(n);
  }
  // mkstemp creates 0600; output files are ordinary user files.
  const bool ok = fchmod(fd, 0644) == 0 && fsync(fd) == 0;
  const std::string error = ok ? "" : std::strerror(errno);
  if (close(fd) != 0 || !ok || std::rename(temp.c_str(), path.c_str()) != 0) {
    const std::string why = error.empty() ? std::strerror(errno) : error;
    unlink(temp.c_str());
    return absl::InvalidArgumentError(absl::StrCat("cannot write ", path, ": ", why));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return absl::InvalidArgumentError(absl::StrCat("cannot read ", path));
  return buffer.str();
}

}  // namespace sacplan
