#include "sacplan/planner/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"

namespace sacplan {

namespace {

absl::Status CannotWrite(const std::string& path, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("cannot write ", path, ": ", why));
}

// Writes `contents` to a fresh temporary beside `path` and flushes it; its
// name goes to `temp`. On failure nothing is left behind.
absl::Status WriteTemporary(const std::string& path, const std::string& contents,
                            std::string& temp) {
  temp = path + ".tmpXXXXXX";
  const int fd = mkstemp(temp.data());
  if (fd < 0) return CannotWrite(path, std::strerror(errno));
  size_t written = 0;
  while (written < contents.size()) {
    const ssize_t n = write(fd, contents.data() + written, contents.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string error = std::strerror(errno);
      close(fd);
      unlink(temp.c_str());
      return CannotWrite(path, error);
    }
    written += static_cast<size_t>(n);
  }
  // mkstemp creates 0600; output files are ordinary user files.
  const bool ok = fchmod(fd, 0644) == 0 && fsync(fd) == 0;
  const std::string error = ok ? "" : std::strerror(errno);
  if (close(fd) != 0 || !ok) {
    const std::string why = error.empty() ? std::strerror(errno) : error;
    unlink(temp.c_str());
    return CannotWrite(path, why);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path,
                                 const std::string& contents) {
  return WriteFilesAtomically({{path, contents}});
}

absl::Status WriteFilesAtomically(
    const std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<std::string> temps;
  auto remove_temps = [&temps](size_t from) {
    for (size_t i = from; i < temps.size(); ++i) unlink(temps[i].c_str());
  };
  for (const auto& [path, contents] : files) {
    std::string temp;
    if (absl::Status s = WriteTemporary(path, contents, temp); !s.ok()) {
      remove_temps(0);
      return s;
    }
    temps.push_back(std::move(temp));
  }
  for (size_t i = 0; i < files.size(); ++i) {
    if (std::rename(temps[i].c_str(), files[i].first.c_str()) != 0) {
      const std::string why = std::strerror(errno);
      remove_temps(i);
      return CannotWrite(files[i].first, why);
    }
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
