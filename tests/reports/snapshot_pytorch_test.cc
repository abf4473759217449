// The allocation trace read by PyTorch's own snapshot tooling
// (torch.cuda._memory_viz, what `python -m torch.cuda._memory_viz` runs):
// its text trace must know every action and count every entry. Skips when
// python3 cannot import it (no PyTorch installed).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "report_fixtures.h"
#include "sacplan/planner/search/presets.h"
#include "sacplan/reports/snapshot.h"

namespace sacplan::testing {
namespace {

namespace fs = std::filesystem;

constexpr const char* kScript = R"py(
import io, json, sys, warnings
warnings.filterwarnings("ignore")
from torch.cuda import _memory_viz as viz
snapshot = json.load(open(sys.argv[1]))
with open(sys.argv[2], "w") as out:
    out.write(viz.trace(snapshot))
    out.write("\n=== segsum\n")
    out.write(viz.segsum(snapshot))
)py";

TEST(SnapshotPyTorchTest, MemoryVizReadsTheTrace) {
  const fs::path dir = fs::path(::testing::TempDir()) / "sacplan_snapshot_pytorch";
  fs::create_directories(dir);
  if (std::system("python3 -c 'import torch.cuda._memory_viz' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "python3 cannot import torch.cuda._memory_viz (PyTorch not installed)";
  }
  std::unique_ptr<LoadedModel> model = LoadModel("wan-tiny");
  const StepResult result =
      *SimulateStep(model->analyzed, *PresetMasks(model->analyzed, "full"),
                    Semantics::kSacplan, {.record_timeline = true, .record_events = true});
  const nlohmann::json snapshot = *reports::MemorySnapshotJson(result);
  const fs::path json = dir / "trace.json", script = dir / "read.py", out = dir / "out.txt";
  std::ofstream(json) << snapshot.dump();
  std::ofstream(script) << kScript;
  fs::remove(out);
  const std::string command = "python3 '" + script.string() + "' '" + json.string() + "' '" +
                              out.string() + "' 2>'" + (dir / "err.txt").string() + "'";
  ASSERT_EQ(std::system(command.c_str()), 0) << "see " << (dir / "err.txt");
  std::stringstream text;
  text << std::ifstream(out).rdbuf();
  const std::string trace = text.str();
  const nlohmann::json& events = snapshot["device_traces"][0];
  int allocs = 0;
  for (const nlohmann::json& e : events) allocs += e["action"] == "alloc";
  EXPECT_NE(trace.find(std::to_string(events.size()) + " entries"), std::string::npos);
  EXPECT_EQ(Count(trace, "cudaMalloc("), allocs);
  EXPECT_EQ(Count(trace, "{'action'"), 0) << "an action PyTorch does not know";
  EXPECT_NE(trace.find("=== segsum\nSummary of segments"), std::string::npos);
}

}  // namespace
}  // namespace sacplan::testing
