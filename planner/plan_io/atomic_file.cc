#include "sacplan/planner/plan_io/atomic_file.h"

#include <fcntl.h>
#include <stdlib.h>
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

// The directory part of `path` with its slash ("" for a bare name).
std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

// mkstemp's template for a scratch file beside `path`. The name is short
// (10 bytes) and independent of the final name's length, so that any name
// the file system accepts (up to 255 bytes) can be written.
std::string ScratchTemplate(const std::string& path) {
  return DirectoryOf(path) + ".sacXXXXXX";
}

// A destination must be absent or a regular file: renaming over a device or
// FIFO would replace the node (as root, /dev/null itself) with a regular
// file, and a directory cannot be replaced at all.
absl::Status CheckDestination(const std::string& path) {
  struct stat info {};
  if (stat(path.c_str(), &info) != 0) {
    // Absent is fine; a missing directory fails when the temporary is made.
    if (errno == ENOENT) return absl::OkStatus();
    return CannotWrite(path, std::strerror(errno));
  }
  if (S_ISDIR(info.st_mode)) return CannotWrite(path, "it is a directory");
  if (!S_ISREG(info.st_mode)) {
    return CannotWrite(path, "not a regular file (a device, FIFO or socket)");
  }
  return absl::OkStatus();
}

// The file `path` names, for comparing destinations: its directory resolved
// (symbolic links, "." and "..") and its last component.
std::string Identity(const std::string& path) {
  const std::string dir = DirectoryOf(path);
  char* resolved = realpath(dir.empty() ? "." : dir.c_str(), nullptr);
  if (resolved == nullptr) return path;
  std::string identity = absl::StrCat(resolved, "/", path.substr(dir.size()));
  free(resolved);
  return identity;
}

bool SameFile(const std::string& a, const std::string& b) {
  if (Identity(a) == Identity(b)) return true;
  struct stat sa {}, sb {};
  return stat(a.c_str(), &sa) == 0 && stat(b.c_str(), &sb) == 0 &&
         sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

// Writes `contents` to a fresh temporary beside `path` and flushes it; its
// name goes to `temp`. On failure nothing is left behind.
absl::Status WriteTemporary(const std::string& path, const std::string& contents,
                            std::string& temp) {
  temp = ScratchTemplate(path);
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

// A second name (hard link) for the existing file at `path`, beside it, so
// that it can be put back; "" in `backup` when there is no file there.
absl::Status KeepExisting(const std::string& path, std::string& backup) {
  backup.clear();
  struct stat info {};
  if (lstat(path.c_str(), &info) != 0) return absl::OkStatus();
  std::string name = ScratchTemplate(path);
  const int fd = mkstemp(name.data());
  if (fd < 0) return CannotWrite(path, std::strerror(errno));
  close(fd);
  // The name is ours (mkstemp made it); link needs it free.
  if (unlink(name.c_str()) != 0 || link(path.c_str(), name.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    unlink(name.c_str());
    return CannotWrite(path, absl::StrCat("cannot keep the existing file: ", why));
  }
  backup = std::move(name);
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path,
                                 const std::string& contents) {
  return WriteFilesAtomically({{path, contents}});
}

absl::Status WriteFilesAtomically(
    const std::vector<std::pair<std::string, std::string>>& files) {
  // Every destination is checked before anything is written.
  for (size_t i = 0; i < files.size(); ++i) {
    if (absl::Status s = CheckDestination(files[i].first); !s.ok()) return s;
    for (size_t j = 0; j < i; ++j) {
      if (SameFile(files[i].first, files[j].first)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "cannot write ", files[j].first, " and ", files[i].first,
            ": they name the same file"));
      }
    }
  }
  std::vector<std::string> temps, backups;
  auto remove_all = [&temps, &backups](size_t temps_from) {
    for (size_t i = temps_from; i < temps.size(); ++i) unlink(temps[i].c_str());
    for (const std::string& b : backups) {
      if (!b.empty()) unlink(b.c_str());
    }
  };
  for (const auto& [path, contents] : files) {
    std::string temp;
    if (absl::Status s = WriteTemporary(path, contents, temp); !s.ok()) {
      remove_all(0);
      return s;
    }
    temps.push_back(std::move(temp));
  }
  // Every file but the last may have to be put back if a later rename
  // fails; the last rename's failure leaves its own file as it was.
  for (size_t i = 0; i + 1 < files.size(); ++i) {
    std::string backup;
    if (absl::Status s = KeepExisting(files[i].first, backup); !s.ok()) {
      remove_all(0);
      return s;
    }
    backups.push_back(std::move(backup));
  }
  for (size_t i = 0; i < files.size(); ++i) {
    if (std::rename(temps[i].c_str(), files[i].first.c_str()) == 0) continue;
    const std::string why = std::strerror(errno);
    for (size_t j = 0; j < i; ++j) {
      const std::string& path = files[j].first;
      if (backups[j].empty()) {
        unlink(path.c_str());
      } else if (std::rename(backups[j].c_str(), path.c_str()) == 0) {
        backups[j].clear();
      }
    }
    remove_all(i);
    return CannotWrite(files[i].first, why);
  }
  remove_all(files.size());
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
