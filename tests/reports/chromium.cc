#include "chromium.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace sacplan::testing {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void ReplaceAll(std::string& text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

}  // namespace

std::string FindChromium() {
  if (const char* set = std::getenv("SACPLAN_CHROMIUM"); set != nullptr && *set) {
    return access(set, X_OK) == 0 ? set : "";
  }
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  std::vector<std::string> entries;
  for (std::string dir; std::getline(dirs, dir, ':');) entries.push_back(dir);
  for (const char* name : {"chromium", "chromium-browser", "google-chrome",
                           "google-chrome-stable"}) {
    for (const std::string& dir : entries) {
      const fs::path candidate = fs::path(dir.empty() ? "." : dir) / name;
      if (access(candidate.c_str(), X_OK) == 0) return candidate.string();
    }
  }
  return "";
}

BrowserRun RunChromium(const std::string& chromium, const std::vector<std::string>& flags,
                       const fs::path& html, const fs::path& dir, int timeout_s) {
  const fs::path out_path = dir / "chromium.stdout", err_path = dir / "chromium.stderr";
  std::vector<std::string> args = {
      chromium,
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-dev-shm-usage",
      "--no-first-run",
      "--no-default-browser-check",
      "--disable-extensions",
      "--hide-scrollbars",
      "--enable-logging=stderr",
      "--v=0",
      "--window-size=1280,800",
      "--user-data-dir=" + (dir / "chromium-profile").string(),
  };
  args.insert(args.end(), flags.begin(), flags.end());
  args.push_back("file://" + fs::absolute(html).string());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  BrowserRun run;
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    run.err = "posix_spawn failed";
    return run;
  }
  int status = 0;
  const auto deadline = start + std::chrono::seconds(timeout_s);
  while (true) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      status = -1;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  run.wall_ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - start).count();
  if (status != -1 && WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
  run.out = Slurp(out_path);
  run.err = Slurp(err_path);
  return run;
}

std::string SelfcheckText(const std::string& dom) {
  const std::string open = "<pre id=\"selfcheck\">";
  const size_t start = dom.find(open);
  if (start == std::string::npos) return "";
  const size_t end = dom.find("</pre>", start);
  if (end == std::string::npos) return "";
  std::string text = dom.substr(start + open.size(), end - start - open.size());
  ReplaceAll(text, "&quot;", "\"");
  ReplaceAll(text, "&lt;", "<");
  ReplaceAll(text, "&gt;", ">");
  ReplaceAll(text, "&amp;", "&");
  return text;
}

std::vector<std::string> ConsoleLines(const std::string& err) {
  std::vector<std::string> lines;
  std::stringstream in(err);
  for (std::string line; std::getline(in, line);) {
    if (line.find(":CONSOLE") != std::string::npos) lines.push_back(line);
  }
  return lines;
}

}  // namespace sacplan::testing
