#include "report_fixtures.h"

#include <gtest/gtest.h>

#include "sacplan/models/model_config.h"
#include "sacplan/planner/search/presets.h"
#include "sacplan/profiler/device.h"
#include "sacplan/profiler/roofline.h"

namespace sacplan::testing {

std::unique_ptr<LoadedModel> LoadModel(const std::string& name, int64_t tokens,
                                       const ParallelConfig& parallel) {
  ModelConfig config = *ModelConfigByName(name);
  if (tokens > 0) config.tokens = tokens;
  auto loaded = std::make_unique<LoadedModel>();
  absl::StatusOr<Profile> profile = RooflineProfile(config, *DeviceByName("h100"), parallel);
  EXPECT_TRUE(profile.ok()) << profile.status();
  loaded->profile = *std::move(profile);
  loaded->analyzed = *AnalyzeModel(loaded->profile.model);
  return loaded;
}

reports::ReportData SolvedReport(const LoadedModel& model, int64_t budget_bytes,
                                 int frontier_points) {
  reports::ReportOptions options;
  options.budget_bytes = budget_bytes;
  options.frontier_points = frontier_points;
  absl::StatusOr<reports::ReportData> data =
      reports::BuildReportData(model.profile, model.analyzed, {}, {}, options);
  EXPECT_TRUE(data.ok()) << data.status();
  return data.ok() ? *std::move(data) : reports::ReportData{};
}

int64_t PresetPeakBytes(const LoadedModel& model, const std::string& preset) {
  return SimulateStep(model.analyzed, *PresetMasks(model.analyzed, preset),
                      Semantics::kSacplan)
      ->peak_bytes;
}

int Count(const std::string& text, const std::string& needle) {
  int count = 0;
  for (size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + needle.size())) {
    ++count;
  }
  return count;
}

std::string SvgById(const std::string& html, const std::string& id) {
  const size_t at = html.find("id=\"" + id + "\"");
  if (at == std::string::npos) return "";
  const size_t start = html.rfind("<svg", at);
  const size_t end = html.find("</svg>", at);
  if (start == std::string::npos || end == std::string::npos) return "";
  return html.substr(start, end + 6 - start);
}

}  // namespace sacplan::testing
