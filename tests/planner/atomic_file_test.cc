#include "sacplan/planner/plan_io/atomic_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace sacplan {
namespace {

namespace fs = std::filesystem;

// A fresh, empty directory for one test.
fs::path FreshDir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("atomic_file_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::vector<std::string> Entries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(AtomicFileTest, WritesExactlyTheContentsAndNothingBeside) {
  const fs::path dir = FreshDir("write");
  const fs::path path = dir / "plan.json";
  // Binary-safe: a NUL byte and no trailing newline.
  const std::string contents("{\"a\": 1}\0tail", 13);
  ASSERT_TRUE(WriteFileAtomically(path.string(), contents).ok());
  EXPECT_EQ(*ReadFile(path.string()), contents);
  EXPECT_EQ(fs::file_size(path), contents.size());
  EXPECT_EQ(Entries(dir), std::vector<std::string>{"plan.json"});
  // An ordinary user file, not mkstemp's 0600.
  struct stat info {};
  ASSERT_EQ(stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0644u);
}

TEST(AtomicFileTest, ReplacesALongerFileWhole) {
  const fs::path dir = FreshDir("replace");
  const fs::path path = dir / "out.txt";
  ASSERT_TRUE(WriteFileAtomically(path.string(), std::string(4096, 'x')).ok());
  ASSERT_TRUE(WriteFileAtomically(path.string(), "short").ok());
  EXPECT_EQ(*ReadFile(path.string()), "short");
  ASSERT_TRUE(WriteFileAtomically(path.string(), "").ok());
  EXPECT_EQ(*ReadFile(path.string()), "");
  EXPECT_EQ(Entries(dir), std::vector<std::string>{"out.txt"});
}

TEST(AtomicFileTest, ADirectoryTargetIsRefusedAndLeftAlone) {
  const fs::path dir = FreshDir("directory_target");
  const fs::path target = dir / "report.html";
  fs::create_directories(target);
  std::ofstream(target / "keep") << "kept";
  const absl::Status status = WriteFileAtomically(target.string(), "new contents");
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find(target.string()), std::string::npos) << status;
  EXPECT_NE(status.message().find("directory"), std::string::npos) << status;
  EXPECT_TRUE(fs::is_directory(target));
  EXPECT_EQ(*ReadFile((target / "keep").string()), "kept");
  EXPECT_EQ(Entries(dir), std::vector<std::string>{"report.html"});
}

TEST(AtomicFileTest, ADeviceOrFifoTargetIsRefusedAndLeftAlone) {
  // Renaming over /dev/null would replace the device (as root, the
  // system's) with a regular file.
  const absl::Status device = WriteFileAtomically("/dev/null", "x");
  ASSERT_FALSE(device.ok());
  EXPECT_NE(device.message().find("/dev/null"), std::string::npos) << device;
  EXPECT_TRUE(fs::is_character_file("/dev/null"));

  const fs::path dir = FreshDir("fifo_target");
  const fs::path fifo = dir / "pipe";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  const absl::Status status = WriteFileAtomically(fifo.string(), "x");
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("not a regular file"), std::string::npos) << status;
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_EQ(Entries(dir), std::vector<std::string>{"pipe"});
}

TEST(AtomicFileTest, AnyNameTheFileSystemAcceptsCanBeWritten) {
  // The temporary's name must not be longer than the final one's limit.
  const fs::path dir = FreshDir("long_names");
  for (const size_t length : {250u, 255u}) {
    const fs::path path = dir / std::string(length, 'n');
    ASSERT_TRUE(WriteFileAtomically(path.string(), "x").ok()) << length;
    EXPECT_EQ(*ReadFile(path.string()), "x");
  }
  EXPECT_EQ(Entries(dir).size(), 2u);
}

TEST(AtomicFileTest, TwoOutputsNamingOneFileAreRefused) {
  const fs::path dir = FreshDir("same_file");
  const fs::path path = dir / "out.json";
  std::ofstream(path) << "old";
  const absl::Status status = WriteFilesAtomically(
      {{path.string(), "a"}, {(dir / "." / "out.json").string(), "b"}});
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("the same file"), std::string::npos) << status;
  EXPECT_EQ(*ReadFile(path.string()), "old");
  EXPECT_EQ(Entries(dir), std::vector<std::string>{"out.json"});
}

TEST(AtomicFileTest, ABadSecondOutputLeavesTheFirstUnchanged) {
  const fs::path dir = FreshDir("all_or_none");
  const fs::path first = dir / "report.html";
  std::ofstream(first) << "old report";
  fs::create_directories(dir / "snap");
  const absl::Status status = WriteFilesAtomically(
      {{first.string(), "new report"}, {(dir / "snap").string(), "trace"}});
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(*ReadFile(first.string()), "old report");
  EXPECT_EQ(Entries(dir), (std::vector<std::string>{"report.html", "snap"}));
  // Without an old report, none is left either.
  fs::remove(first);
  ASSERT_FALSE(WriteFilesAtomically(
      {{first.string(), "new report"}, {(dir / "snap").string(), "trace"}}).ok());
  EXPECT_EQ(Entries(dir), std::vector<std::string>{"snap"});
}

TEST(AtomicFileTest, TwoOutputsAreBothWrittenAndNoScratchIsLeft) {
  const fs::path dir = FreshDir("both");
  std::ofstream(dir / "a") << "old a";
  ASSERT_TRUE(WriteFilesAtomically(
      {{(dir / "a").string(), "new a"}, {(dir / "b").string(), "new b"}}).ok());
  EXPECT_EQ(*ReadFile((dir / "a").string()), "new a");
  EXPECT_EQ(*ReadFile((dir / "b").string()), "new b");
  EXPECT_EQ(Entries(dir), (std::vector<std::string>{"a", "b"}));
}

TEST(AtomicFileTest, AMissingDirectoryIsAnErrorNamingThePath) {
  const fs::path dir = FreshDir("missing_dir");
  const fs::path path = dir / "no_such_dir" / "plan.json";
  const absl::Status status = WriteFileAtomically(path.string(), "x");
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find(path.string()), std::string::npos) << status;
  EXPECT_FALSE(fs::exists(path));
  EXPECT_EQ(Entries(dir), std::vector<std::string>{});
}

TEST(AtomicFileTest, ReadingAMissingFileIsNotFoundNamingIt) {
  const fs::path path = FreshDir("read_missing") / "absent.json";
  const absl::StatusOr<std::string> read = ReadFile(path.string());
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(read.status().message().find(path.string()), std::string::npos)
      << read.status();
}

}  // namespace
}  // namespace sacplan
