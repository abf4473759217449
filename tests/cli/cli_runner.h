// Runs the built `sacplan` binary in a scratch directory and captures what
// a user would see: exit status, stdout and stderr.
#ifndef SACPLAN_TESTS_CLI_CLI_RUNNER_H_
#define SACPLAN_TESTS_CLI_CLI_RUNNER_H_

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sacplan::testing {

struct CliResult {
  int exit_code = -1;  // -1 when the process did not exit normally
  std::string out;
  std::string err;
};

// Spawns SACPLAN_BINARY with `args` (no shell involved); `dir` holds the
// captured streams while it runs. Paths in `args` should be absolute.
CliResult RunSacplan(const std::vector<std::string>& args,
                     const std::filesystem::path& dir);
// The same for another executable, e.g. a copy of sacplan elsewhere.
CliResult RunBinary(const std::string& binary, const std::vector<std::string>& args,
                    const std::filesystem::path& dir);
// RunSacplan for a command that must succeed: exit status 0 and nothing on
// stderr (checked with EXPECT, so the test goes on); returns its stdout.
std::string MustRun(const std::vector<std::string>& args, const std::filesystem::path& dir);
// `sacplan profile <model flags> --device h100 -o dir/profile.json`, which
// must succeed; returns the profile's path.
std::filesystem::path MakeProfile(const std::filesystem::path& dir,
                                  const std::vector<std::string>& model);

// A fresh, empty directory for one test, under gtest's TempDir().
std::filesystem::path FreshDir(const std::string& name);

std::string ReadText(const std::filesystem::path& path);
void WriteText(const std::filesystem::path& path, const std::string& text);
nlohmann::json ReadJson(const std::filesystem::path& path);
void WriteJson(const std::filesystem::path& path, const nlohmann::json& doc);

// Number of lines in `text` (a final newline does not start a line).
int LineCount(const std::string& text);

// A plan's `predicted` figures.
struct Predicted {
  int64_t peak_bytes = 0;
  double step_ms = 0;
  int64_t reserved_peak_bytes = 0;
};
// `sacplan plan --profile PROFILE HOW...` into dir/NAME.json; its prediction.
Predicted PlanWith(const std::filesystem::path& dir, const std::filesystem::path& profile,
                   const std::vector<std::string>& how, const std::string& name);

}  // namespace sacplan::testing

#endif  // SACPLAN_TESTS_CLI_CLI_RUNNER_H_
