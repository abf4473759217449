// Report speed and size on the largest built-in video model: Wan2.1-14B,
// 40 blocks, 75,600 tokens, h100 roofline profile, budget = attn_only's peak.
//
// The targets: the HTML stays under 2 MB and renders in under 2 s
// in headless Chromium. BM_BrowserRender launches Chromium per iteration
// (skipped when none is found); its counter page_ready_ms is the page's own
// performance.now() at the end of its script (parse, layout of every chart,
// the self-check), and the iteration time adds Chromium's start and exit.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>

#include <benchmark/benchmark.h>

#include "bench_util.h"

#include "sacplan/models/model_config.h"
#include "sacplan/planner/search/presets.h"
#include "sacplan/planner/plan_io/profile.h"
#include "sacplan/planner/memory/simulator.h"
#include "sacplan/profiler/device.h"
#include "sacplan/profiler/roofline.h"
#include "sacplan/reports/report.h"
#include "sacplan/reports/snapshot.h"

namespace sacplan {
namespace {

using bench::OrDie;

struct Fixture {
  Profile profile;
  AnalyzedModel model;
  reports::ReportOptions options;
};

// Built once and never moved (the analysis points into the profile).
const Fixture& Wan14B() {
  static const Fixture* fixture = [] {
    auto* f = new Fixture;
    ModelConfig config = OrDie(ModelConfigByName("wan2.1-14b"), "wan2.1-14b config");
    config.tokens = 75600;
    f->profile = OrDie(RooflineProfile(config, OrDie(DeviceByName("h100"), "h100")),
                       "roofline profile");
    f->model = OrDie(AnalyzeModel(f->profile.model), "analysis");
    f->options.budget_bytes =
        OrDie(SimulateStep(f->model, OrDie(PresetMasks(f->model, "attn_only"), "preset"),
                           Semantics::kSacplan),
              "attn_only")
            .peak_bytes;
    return f;
  }();
  return *fixture;
}

reports::ReportData Data() {
  const Fixture& f = Wan14B();
  return OrDie(reports::BuildReportData(f.profile, f.model, {}, {}, f.options), "report data");
}

// What `sacplan report --budget` pays besides reading the profile: solve,
// simulate the presets with timelines, 48-point frontier.
void BM_BuildReportData(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(Data());
}
BENCHMARK(BM_BuildReportData)->Unit(benchmark::kMillisecond);

void BM_RenderReportHtml(benchmark::State& state) {
  const reports::ReportData data = Data();
  size_t bytes = 0;
  for (auto _ : state) {
    const std::string html = reports::RenderReportHtml(data);
    bytes = html.size();
    benchmark::DoNotOptimize(html.data());
  }
  state.counters["html_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_RenderReportHtml)->Unit(benchmark::kMillisecond);

void BM_MemorySnapshot(benchmark::State& state) {
  const reports::ReportData data = Data();
  const reports::ReportPlan& chosen = data.plans.front();
  for (auto _ : state) {
    const StepResult traced = OrDie(
        SimulateStep(Wan14B().model, chosen.masks, chosen.semantics,
                     {.record_timeline = true, .record_events = true}),
        "simulate");
    benchmark::DoNotOptimize(OrDie(reports::MemorySnapshotJson(traced), "snapshot").dump());
  }
}
BENCHMARK(BM_MemorySnapshot)->Unit(benchmark::kMillisecond);

std::string FindChromium() {
  if (const char* set = std::getenv("SACPLAN_CHROMIUM"); set != nullptr && *set) return set;
  for (const char* path : {"/usr/bin/chromium", "/usr/bin/chromium-browser",
                           "/usr/bin/google-chrome", "/usr/bin/google-chrome-stable"}) {
    if (std::ifstream(path).good()) return path;
  }
  return "";
}

void BM_BrowserRender(benchmark::State& state) {
  const std::string chromium = FindChromium();
  if (chromium.empty()) {
    state.SkipWithError("Chromium not found (Debian package chromium, or SACPLAN_CHROMIUM)");
    return;
  }
  const std::string dir = "bench_report_browser";
  std::filesystem::create_directories(dir);
  const std::string html = reports::RenderReportHtml(Data());
  std::ofstream(dir + "/report.html", std::ios::binary) << html;
  const std::string page =
      (std::filesystem::current_path() / dir / "report.html").string();
  const std::string command =
      "'" + chromium + "' --headless --no-sandbox --disable-gpu --disable-dev-shm-usage "
      "--no-first-run --window-size=1280,800 --user-data-dir=" + dir +
      "/profile --dump-dom 'file://" + page + "' > " + dir + "/dom.html 2>/dev/null";
  double page_ready_ms = 0;
  int runs = 0;
  for (auto _ : state) {
    if (std::system(command.c_str()) != 0) {
      state.SkipWithError("chromium failed");
      return;
    }
    std::stringstream dom;
    dom << std::ifstream(dir + "/dom.html").rdbuf();
    const std::string text = dom.str();
    // Serialised text keeps its quotes: "render_ms":123.4
    const size_t at = text.find("\"render_ms\":");
    if (at == std::string::npos) {
      state.SkipWithError("the page wrote no self-check");
      return;
    }
    page_ready_ms += std::strtod(text.c_str() + at + 12, nullptr);
    ++runs;
  }
  state.counters["page_ready_ms"] = runs > 0 ? page_ready_ms / runs : 0;
  state.counters["html_bytes"] = static_cast<double>(html.size());
}
BENCHMARK(BM_BrowserRender)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace
}  // namespace sacplan

BENCHMARK_MAIN();
