// Whole-process cost of the planning executable, as a user pays it: spawn
// the built `sacplan`, wait for it, per run. Includes exec, dynamic loading,
// static initialisers, flag parsing, reading the profile, solving and
// writing the plan.
//
// The targets: `sacplan --help` < 50 ms; `sacplan plan` for
// Wan2.1-14B (40 blocks, 75,600 tokens, h100 roofline) at one budget
// < 0.15 s. Wall time per run is the figure (UseRealTime): the work happens
// in a child process, which this process's CPU time does not see.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

extern char** environ;

namespace {

namespace fs = std::filesystem;

// Runs SACPLAN_BINARY with `args`, output to /dev/null; its exit status, or
// -1 when it could not be spawned or did not exit.
int RunSacplan(std::vector<std::string> args) {
  args.insert(args.begin(), SACPLAN_BINARY);
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// A scratch directory holding the Wan2.1-14B roofline profile, made once
// with the same executable.
const fs::path& Scratch() {
  static const fs::path dir = [] {
    const fs::path d = fs::temp_directory_path() /
                       ("sacplan_bench_cli_" + std::to_string(getpid()));
    fs::create_directories(d);
    const int rc = RunSacplan({"profile", "--model", "wan2.1-14b", "--frames", "81",
                               "--height", "720", "--width", "1280", "--device", "h100",
                               "-o", (d / "profile.json").string()});
    if (rc != 0) {
      std::fprintf(stderr, "sacplan profile failed (exit %d)\n", rc);
      std::exit(1);
    }
    return d;
  }();
  return dir;
}

void RunEach(benchmark::State& state, const std::vector<std::string>& args) {
  for (auto _ : state) {
    const int rc = RunSacplan(args);
    if (rc != 0) {
      state.SkipWithError(("sacplan exited with " + std::to_string(rc)).c_str());
      return;
    }
  }
}

void BM_Help(benchmark::State& state) { RunEach(state, {"--help"}); }

void BM_PlanWan14B(benchmark::State& state) {
  const fs::path& dir = Scratch();
  RunEach(state, {"plan", "--profile", (dir / "profile.json").string(), "--budget",
                  "400GB", "-o", (dir / "plan.json").string()});
}

BENCHMARK(BM_Help)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_PlanWan14B)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::error_code ignored;
  fs::remove_all(fs::temp_directory_path() /
                     ("sacplan_bench_cli_" + std::to_string(getpid())),
                 ignored);
  return 0;
}
