// Profiles and reports built in-process for the report tests: roofline
// profiles of the built-in models, and the report data made from them.
#ifndef SACPLAN_TESTS_REPORTS_REPORT_FIXTURES_H_
#define SACPLAN_TESTS_REPORTS_REPORT_FIXTURES_H_

#include <cstdint>
#include <memory>
#include <string>

#include "sacplan/planner/plan_io/profile.h"
#include "sacplan/planner/memory/simulator.h"
#include "sacplan/reports/report.h"

namespace sacplan::testing {

// A profile and its analysis; heap-held because the analysis points into
// the profile's model.
struct LoadedModel {
  Profile profile;
  AnalyzedModel analyzed;
};

// Roofline profile of a built-in model on h100, one rank of `parallel`;
// tokens 0 keeps the default.
std::unique_ptr<LoadedModel> LoadModel(const std::string& name, int64_t tokens = 0,
                                       const ParallelConfig& parallel = {});

// Report data solved for `budget_bytes` (the chosen plan is "optimal").
reports::ReportData SolvedReport(const LoadedModel& model, int64_t budget_bytes,
                                 int frontier_points = 24);

// The peak of a preset on the model.
int64_t PresetPeakBytes(const LoadedModel& model, const std::string& preset);

// Occurrences of `needle` in `text`.
int Count(const std::string& text, const std::string& needle);

// The markup of the <svg> element whose id is `id` (empty when missing).
std::string SvgById(const std::string& html, const std::string& id);

}  // namespace sacplan::testing

#endif  // SACPLAN_TESTS_REPORTS_REPORT_FIXTURES_H_
