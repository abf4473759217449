#include "cli_runner.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

extern char** environ;

namespace sacplan::testing {

CliResult RunSacplan(const std::vector<std::string>& args,
                     const std::filesystem::path& dir) {
  return RunBinary(SACPLAN_BINARY, args, dir);
}

CliResult RunBinary(const std::string& binary, const std::vector<std::string>& args,
                    const std::filesystem::path& dir) {
  const std::string out_path = (dir / ".stdout").string();
  const std::string err_path = (dir / ".stderr").string();

  std::vector<std::string> argv_text = {binary};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : argv_text) argv.push_back(arg.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);

  CliResult result;
  pid_t pid = 0;
  // The child keeps our working directory; tests pass absolute paths and
  // `dir` only holds the captured streams.
  int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    ADD_FAILURE() << "cannot spawn " << binary << ": rc " << rc;
    return result;
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  result.out = ReadText(out_path);
  result.err = ReadText(err_path);
  std::filesystem::remove(out_path);
  std::filesystem::remove(err_path);
  return result;
}

std::filesystem::path FreshDir(const std::string& name) {
  std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) /
                              ("sacplan_cli_" + std::to_string(getpid())) /
                              name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string ReadText(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void WriteText(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

nlohmann::json ReadJson(const std::filesystem::path& path) {
  return nlohmann::json::parse(ReadText(path));
}

void WriteJson(const std::filesystem::path& path, const nlohmann::json& doc) {
  WriteText(path, doc.dump(1));
}

int LineCount(const std::string& text) {
  int lines = 0;
  for (char c : text) lines += c == '\n';
  if (!text.empty() && text.back() != '\n') ++lines;
  return lines;
}

std::string MustRun(const std::vector<std::string>& args, const std::filesystem::path& dir) {
  CliResult r = RunSacplan(args, dir);
  EXPECT_EQ(r.exit_code, 0) << "stderr: " << r.err;
  EXPECT_EQ(r.err, "");
  return r.out;
}

std::filesystem::path MakeProfile(const std::filesystem::path& dir,
                                  const std::vector<std::string>& model) {
  std::filesystem::path profile = dir / "profile.json";
  std::vector<std::string> args = {"profile"};
  args.insert(args.end(), model.begin(), model.end());
  args.insert(args.end(), {"--device", "h100", "-o", profile.string()});
  MustRun(args, dir);
  return profile;
}

Predicted PlanWith(const std::filesystem::path& dir, const std::filesystem::path& profile,
                   const std::vector<std::string>& how, const std::string& name) {
  std::filesystem::path plan = dir / (name + ".json");
  std::vector<std::string> args = {"plan", "--profile", profile.string(), "-o", plan.string()};
  args.insert(args.end(), how.begin(), how.end());
  MustRun(args, dir);
  const nlohmann::json predicted = ReadJson(plan).at("predicted");
  return {predicted.at("peak_bytes").get<int64_t>(), predicted.at("step_ms").get<double>(),
          predicted.at("reserved_peak_bytes").get<int64_t>()};
}

}  // namespace sacplan::testing
