// The report's markup, checked without a browser: marks per chart, the peak
// label, the verdict, escaping, self-containment, size, and bad input.
#include "sacplan/reports/report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "report_fixtures.h"
#include "sacplan/planner/ir/bytes.h"
#include "sacplan/planner/plan_io/plan.h"
#include "sacplan/planner/search/presets.h"
#include "sacplan/planner/search/reserved_budget.h"
#include "sacplan/reports/charts.h"

namespace sacplan::testing {
namespace {

using reports::ReportData;
using reports::RenderReportHtml;

// Smallest y (the tallest point) among the V commands of an SVG path.
double TopOfPath(const std::string& path_markup) {
  const size_t d = path_markup.find(" d=\"");
  double top = 1e9;
  for (size_t at = path_markup.find('V', d); at != std::string::npos;
       at = path_markup.find('V', at + 1)) {
    top = std::min(top, std::strtod(path_markup.c_str() + at + 1, nullptr));
  }
  return top;
}

double Attribute(const std::string& markup, const std::string& name) {
  const size_t at = markup.find(" " + name + "=\"");
  EXPECT_NE(at, std::string::npos) << name;
  return std::strtod(markup.c_str() + at + name.size() + 3, nullptr);
}

class ReportTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = LoadModel("wan2.1-1.3b").release();
    budget_bytes_ = PresetPeakBytes(*model_, "attn_only");
    data_ = new ReportData(SolvedReport(*model_, budget_bytes_));
    html_ = new std::string(RenderReportHtml(*data_));
  }
  static void TearDownTestSuite() {
    delete html_;
    delete data_;
    delete model_;
  }
  static LoadedModel* model_;
  static int64_t budget_bytes_;
  static ReportData* data_;
  static std::string* html_;
};
LoadedModel* ReportTest::model_ = nullptr;
int64_t ReportTest::budget_bytes_ = 0;
ReportData* ReportTest::data_ = nullptr;
std::string* ReportTest::html_ = nullptr;

TEST_F(ReportTest, OneTimelinePerPlanWithEveryCategoryAndTheBudget) {
  // The solved plan and the seven compared presets.
  ASSERT_EQ(data_->plans.size(), 1 + ComparedPresetNames().size());
  EXPECT_EQ(data_->plans[0].name, "optimal");
  for (size_t i = 0; i < data_->plans.size(); ++i) {
    const std::string svg = SvgById(*html_, absl::StrCat("timeline-", i));
    ASSERT_FALSE(svg.empty()) << i;
    EXPECT_EQ(Count(svg, "class=\"mark area\""), kMemoryCategoryCount - 1) << i;
    EXPECT_EQ(Count(svg, "class=\"mark budget-line\""), 1) << i;
    EXPECT_EQ(Count(svg, "class=\"mark peak\""), 1) << i;
    // Every category but the FSDP buffers, which one rank never has.
    EXPECT_EQ(Count(svg, "class=\"legend-item\""), kMemoryCategoryCount - 1) << i;
    EXPECT_EQ(Count(svg, "class=\"mark collective\""), 0) << i;
    EXPECT_NE(svg.find(">live memory (GB)<"), std::string::npos);
    EXPECT_NE(svg.find(">simulated step time (ms)<"), std::string::npos);
  }
}

TEST_F(ReportTest, PeakLabelNamesTheSimulatorsPeakAndSitsOnTheTallestColumn) {
  for (size_t i = 0; i < data_->plans.size(); ++i) {
    const StepResult& result = data_->plans[i].result;
    const std::string svg = SvgById(*html_, absl::StrCat("timeline-", i));
    const std::string label = absl::StrCat(
        "peak ", absl::StrFormat("%.2f GB", result.peak_bytes / 1e9), ": ",
        PhaseName(result.peak.phase), ", block ", result.peak.block, ", ",
        result.peak.op, "</text>");
    EXPECT_NE(svg.find(label), std::string::npos) << data_->plans[i].name << " " << label;
    EXPECT_NE(svg.find("data-op=\"" + result.peak.op + "\""), std::string::npos);
    // Reducing the timeline to pixel columns keeps the peak: the top of the
    // stack (the first, cumulative-total path) reaches the peak marker.
    const size_t first_area = svg.find("class=\"mark area\"");
    const std::string area = svg.substr(first_area, svg.find("</path>", first_area) - first_area);
    const size_t circle = svg.find("class=\"mark peak\"");
    EXPECT_DOUBLE_EQ(TopOfPath(area), Attribute(svg.substr(circle), "cy"))
        << data_->plans[i].name;
  }
}

TEST_F(ReportTest, FrontierHasEveryPointPresetAndTheChosenPlan) {
  const std::string svg = SvgById(*html_, "frontier");
  ASSERT_FALSE(svg.empty());
  ASSERT_GE(data_->frontier.size(), 2u);
  EXPECT_EQ(Count(svg, "class=\"mark frontier-point\""),
            static_cast<int>(data_->frontier.size()));
  EXPECT_EQ(Count(svg, "class=\"mark preset\""),
            static_cast<int>(ComparedPresetNames().size()));
  EXPECT_EQ(Count(svg, "class=\"mark chosen\""), 1);
  EXPECT_EQ(Count(svg, "class=\"mark budget-line\""), 1);
  for (const std::string& name : ComparedPresetNames()) {
    EXPECT_NE(svg.find(">" + name + "</text>"), std::string::npos) << name;
  }
  EXPECT_NE(svg.find(">simulated peak memory (GB)<"), std::string::npos);
  EXPECT_GE(Count(svg, "class=\"legend-item\""), 3);
}

TEST_F(ReportTest, DecisionMapHasACellPerBlockAndOpMatchingTheSchedule) {
  const std::string svg = SvgById(*html_, "decision-map");
  ASSERT_FALSE(svg.empty());
  int ops = 0, saved = 0, recomputed = 0;
  const reports::ReportPlan& chosen = data_->plans[0];
  for (size_t b = 0; b < model_->analyzed.blocks.size(); ++b) {
    const BlockAnalysis& block = model_->analyzed.blocks[b];
    ops += block.op_count();
    const BlockSchedule schedule = LowerBlock(block, chosen.masks[b], chosen.semantics);
    for (const ScheduleStep& step : schedule.backward) {
      recomputed += step.kind == StepKind::kRecompute;
    }
    for (int op = 0; op < block.op_count(); ++op) {
      saved += chosen.masks[b][op] || block.ops[op].collective;
    }
  }
  EXPECT_EQ(Count(svg, "class=\"mark cell\""), ops);
  EXPECT_EQ(Count(svg, "data-decision=\"saved\""), saved);
  EXPECT_EQ(Count(svg, "data-decision=\"recomputed\""), recomputed);
  EXPECT_GT(recomputed, 0);  // at attn_only's peak, something is recomputed
  // Hover text: op, output bytes and recompute time.
  EXPECT_NE(svg.find("<title>block 0 self_attn.attn (attention): saved; output "),
            std::string::npos);
}

// A report solved with offload: the plan's line names the host bytes, its
// timeline draws the host's bytes as a line reaching the host peak and
// each copy on its engine's lane, and its decision map and op table count
// the offloaded ops.
TEST(ReportOffloadTest, TimelineDecisionsAndTableShowTheOffload) {
  const std::unique_ptr<LoadedModel> model = LoadModel("wan2.1-1.3b");
  reports::ReportOptions options;
  options.budget_bytes = PresetPeakBytes(*model, "full");
  options.frontier_points = 4;
  options.host_budget_bytes = -1;
  absl::StatusOr<ReportData> data =
      reports::BuildReportData(model->profile, model->analyzed, {}, {}, options);
  ASSERT_TRUE(data.ok()) << data.status();
  const reports::ReportPlan& chosen = data->plans[0];
  ASSERT_GT(chosen.result.offloaded_bytes, 0);
  const std::string html = RenderReportHtml(*data);
  EXPECT_NE(html.find(absl::StrCat("offload ", FormatBytes(chosen.result.offloaded_bytes),
                                   " to the host")),
            std::string::npos);
  const std::string timeline = SvgById(html, "timeline-0");
  const size_t line = timeline.find("class=\"mark host-line\"");
  ASSERT_NE(line, std::string::npos);
  const std::string path = timeline.substr(line, timeline.find("</path>", line) - line);
  EXPECT_LT(TopOfPath(path), Attribute(timeline.substr(timeline.find("budget-line")), "y1"));
  // The copy engines' lanes: a bar per copy each way, as the step ran them.
  int to_host = 0, to_device = 0;
  for (const CopySpan& copy : chosen.result.copies) (copy.to_host ? to_host : to_device) += 1;
  ASSERT_GT(to_host, 0);
  EXPECT_EQ(Count(timeline, "class=\"mark copy to-host\""), to_host);
  EXPECT_EQ(Count(timeline, "class=\"mark copy to-device\""), to_device);
  EXPECT_EQ(Count(SvgById(html, "timeline-1"), "class=\"mark copy"), 0);  // no offload there
  int offloaded = 0;
  for (size_t b = 0; b < chosen.offloaded.size(); ++b) {
    const BlockAnalysis& block = model->analyzed.blocks[b];
    if (chosen.offloaded[b].empty()) continue;
    const BlockSchedule schedule =
        LowerBlock(block, chosen.masks[b], chosen.semantics, chosen.offloaded[b],
                   model->profile.model.host_link);
    std::set<int> ops;
    for (const OffloadCopy& copy : schedule.offload.copies) {
      if (block.tensors[copy.tensor].producer >= 0) ops.insert(block.tensors[copy.tensor].producer);
    }
    offloaded += static_cast<int>(ops.size());
  }
  ASSERT_GT(offloaded, 0);
  EXPECT_EQ(Count(SvgById(html, "decision-map"),
                  "data-decision=\"offloaded (saved in host memory)\""),
            offloaded);
  EXPECT_NE(html.find(">offloaded "), std::string::npos);
}

TEST_F(ReportTest, OpTableHasARowPerOpAndSortableHeaders) {
  const size_t start = html_->find("<table class=\"op-table sortable\"");
  ASSERT_NE(start, std::string::npos);
  const std::string table = html_->substr(start, html_->find("</table>", start) - start);
  EXPECT_EQ(Count(table, "<tr>"), 1 + model_->analyzed.blocks[0].op_count());
  EXPECT_EQ(Count(table, "<th data-type="), 7);
  EXPECT_NE(table.find("recompute cost (ms per GB freed)"), std::string::npos);
}

TEST_F(ReportTest, VerdictComparesWithTheFastestPresetThatFits) {
  const reports::ReportPlan* reference = nullptr;
  for (const reports::ReportPlan& p : data_->plans) {
    if (!p.preset || p.result.peak_bytes > budget_bytes_) continue;
    if (reference == nullptr || p.result.step_ms < reference->result.step_ms) reference = &p;
  }
  ASSERT_NE(reference, nullptr);  // attn_only itself fits its own peak
  const double pct = 100 * (reference->result.step_ms - data_->plans[0].result.step_ms) /
                     reference->result.step_ms;
  ASSERT_GE(pct, 0);  // the solver is never worse than a preset
  const std::string verdict = reports::Verdict(*data_);
  EXPECT_EQ(verdict.rfind("optimal fits in ", 0), 0u) << verdict;
  if (pct >= 0.05) {
    EXPECT_NE(verdict.find(absl::StrFormat("%.1f%% faster than %s (%s)",
                                           pct, reports::PresetDescription(reference->name),
                                           reference->name)),
              std::string::npos)
        << verdict;
  }
  EXPECT_NE(html_->find("<p class=\"verdict\" id=\"verdict\">"), std::string::npos);
  EXPECT_NE(html_->find("tokens <b>72,000</b>"), std::string::npos);
}

TEST_F(ReportTest, SelfContained) {
  EXPECT_EQ(html_->rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(html_->find("https://"), std::string::npos);
  EXPECT_EQ(Count(*html_, "http://"), Count(*html_, "xmlns=\"http://www.w3.org/2000/svg\""));
  EXPECT_EQ(html_->find("<link"), std::string::npos);
  EXPECT_EQ(html_->find(" src="), std::string::npos);
  EXPECT_EQ(html_->find("@import"), std::string::npos);
  EXPECT_EQ(Count(*html_, "<script>"), 1);
}

TEST_F(ReportTest, Deterministic) {
  EXPECT_EQ(RenderReportHtml(*data_), *html_);
}

TEST(ReportEscapingTest, TextFromInputIsEscaped) {
  std::unique_ptr<LoadedModel> model = LoadModel("wan-tiny");
  model->profile.model_name = "<img src=x onerror=alert(1)>&\"'";
  model->profile.device = "<b>dev</b>";
  const ReportData data = SolvedReport(*model, PresetPeakBytes(*model, "none"));
  const std::string html = RenderReportHtml(data);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("<b>dev</b>"), std::string::npos);
  EXPECT_NE(html.find("&lt;img src=x onerror=alert(1)&gt;&amp;&quot;&#39;"), std::string::npos);
}

TEST(ReportDataTest, GivenPlansComeFirstAndPresetsFollow) {
  std::unique_ptr<LoadedModel> model = LoadModel("wan2.1-1.3b");
  reports::PlanFile file;
  file.path = "attn.json";
  file.plan.model_name = model->profile.model_name;
  file.plan.method = "attn_only";
  file.plan.budget_bytes = PresetPeakBytes(*model, "attn_only");
  file.plan.blocks = BlockPlansFromMasks(model->analyzed,
                                         *PresetMasks(model->analyzed, "attn_only"));
  absl::StatusOr<ReportData> data = reports::BuildReportData(
      model->profile, model->analyzed, {file}, {}, reports::ReportOptions{});
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->plans[0].name, "attn_only");
  EXPECT_EQ(data->plans[0].origin, "attn.json");
  EXPECT_FALSE(data->plans[0].preset);
  EXPECT_EQ(data->plans.size(), 1 + ComparedPresetNames().size());
  EXPECT_EQ(data->budget_bytes, file.plan.budget_bytes);  // the plan's own
  // Same masks as the attn_only preset, which is the fastest preset within
  // its own peak for Wan2.1-1.3B: as fast as it.
  EXPECT_NE(reports::Verdict(*data).find(
                "as fast as attention-only checkpointing (attn_only)"),
            std::string::npos)
      << reports::Verdict(*data);
  // The first plan is not drawn as one of the "other given plans".
  EXPECT_EQ(Count(SvgById(RenderReportHtml(*data), "frontier"), "class=\"mark given\""), 0);
}

// Each plan's reserved peak is the caching-allocator replay of its own
// masks, and the plans table shows it beside the allocated peak.
TEST_F(ReportTest, PlansTableShowsReservedNextToAllocated) {
  const size_t table = html_->find("id=\"plans-section\"");
  ASSERT_NE(table, std::string::npos);
  const std::string section = html_->substr(table, html_->find("</section>", table) - table);
  EXPECT_NE(section.find("<th>peak</th><th>reserved</th>"), std::string::npos);
  for (const reports::ReportPlan& plan : data_->plans) {
    const AllocatorStats replay =
        *ReplayPlan(model_->analyzed, plan.masks, plan.semantics);
    EXPECT_EQ(plan.reserved_peak_bytes, replay.reserved_peak_bytes) << plan.name;
    EXPECT_GE(plan.reserved_peak_bytes, plan.result.peak_bytes) << plan.name;
    EXPECT_NE(section.find(absl::StrCat(FormatBytes(plan.result.peak_bytes),
                                        "</td><td class=\"num\">",
                                        FormatBytes(plan.reserved_peak_bytes))),
              std::string::npos)
        << plan.name;
  }
}

// A plan made for a reserved budget is judged by its reserved peak: the
// allocated optimum at its own peak fits that peak as allocated, not as
// reserved.
TEST(ReportDataTest, ReservedBudgetKindJudgesFitsByReservedPeak) {
  std::unique_ptr<LoadedModel> model = LoadModel("wan2.1-1.3b");
  reports::PlanFile file;
  file.path = "attn.json";
  file.plan.model_name = model->profile.model_name;
  file.plan.method = "attn_only";
  file.plan.budget_bytes = PresetPeakBytes(*model, "attn_only");
  file.plan.blocks = BlockPlansFromMasks(model->analyzed,
                                         *PresetMasks(model->analyzed, "attn_only"));
  auto first_row_fits = [&](BudgetKind kind) {
    file.plan.budget_kind = kind;
    absl::StatusOr<ReportData> data = reports::BuildReportData(
        model->profile, model->analyzed, {file}, {}, reports::ReportOptions{});
    EXPECT_TRUE(data.ok()) << data.status();
    EXPECT_EQ(data->budget_kind, kind);
    const std::string html = RenderReportHtml(*data);
    const size_t row = html.find("<tr><td>attn_only</td><td>attn.json</td>");
    EXPECT_NE(row, std::string::npos);
    const std::string row_markup = html.substr(row, html.find("</tr>", row) - row);
    return row_markup.find("<td>yes</td>") != std::string::npos;
  };
  EXPECT_TRUE(first_row_fits(BudgetKind::kAllocated));
  EXPECT_FALSE(first_row_fits(BudgetKind::kReserved));
}

TEST(ReportDataTest, BadInputIsOneLineNamingTheProblem) {
  std::unique_ptr<LoadedModel> model = LoadModel("wan-tiny");
  reports::PlanFile other;
  other.path = "other.json";
  other.plan.model_name = "llama-tiny";
  absl::StatusOr<ReportData> data = reports::BuildReportData(
      model->profile, model->analyzed, {other}, {}, reports::ReportOptions{});
  ASSERT_FALSE(data.ok());
  EXPECT_NE(data.status().message().find("other.json: plan is for model 'llama-tiny'"),
            std::string::npos)
      << data.status();

  reports::PlanFile unknown = other;
  unknown.plan.model_name = model->profile.model_name;
  unknown.plan.blocks = BlockPlansFromMasks(model->analyzed,
                                            *PresetMasks(model->analyzed, "none"));
  unknown.plan.blocks[1].save[0] = "no_such_op";
  data = reports::BuildReportData(model->profile, model->analyzed, {unknown}, {},
                                  reports::ReportOptions{});
  ASSERT_FALSE(data.ok());
  EXPECT_NE(data.status().message().find("other.json: "), std::string::npos);
  EXPECT_NE(data.status().message().find("no_such_op"), std::string::npos);

  data = reports::BuildReportData(model->profile, model->analyzed, {}, {},
                                  reports::ReportOptions{.budget_bytes = 1000});
  ASSERT_FALSE(data.ok());
  EXPECT_NE(data.status().message().find("smallest feasible peak is"), std::string::npos);

  data = reports::BuildReportData(model->profile, model->analyzed, {}, {},
                                  reports::ReportOptions{});
  EXPECT_TRUE(absl::IsInvalidArgument(data.status()));
}

TEST(ReportParallelTest, SaysPerRankAndShowsTheCollectivesAndFsdpBuffers) {
  std::unique_ptr<LoadedModel> model = LoadModel("wan-tiny", 0, {2, true, 2});
  const ReportData data = SolvedReport(*model, PresetPeakBytes(*model, "full"));
  const std::string html = RenderReportHtml(data);
  EXPECT_NE(html.find("per rank of 2 (FSDP, sequence parallel 2)"), std::string::npos);
  const std::string svg = SvgById(html, "timeline-0");
  EXPECT_EQ(Count(svg, "class=\"legend-item\""), kMemoryCategoryCount);
  EXPECT_EQ(Count(svg, "class=\"mark area\""), kMemoryCategoryCount);
  EXPECT_NE(svg.find(">FSDP buffers<"), std::string::npos);
  // Three blocks: each gathers in forward and backward and reduce-scatters,
  // and runs four all-to-alls forward and backward; ticks share a column
  // at most where moments do.
  EXPECT_GE(Count(svg, "class=\"mark collective\""), 9);
  EXPECT_NE(svg.find("self_attn.a2a_q</title>"), std::string::npos);
  EXPECT_NE(svg.find("fsdp.reduce_scatter</title>"), std::string::npos);
}

// The size target of issue 4: Wan2.1-14B, 40 blocks, 75,600 tokens, h100,
// with the CLI's default frontier, stays under 2 MB.
TEST(ReportSizeTest, Wan14BReportIsUnderTwoMegabytes) {
  std::unique_ptr<LoadedModel> model = LoadModel("wan2.1-14b", 75600);
  ASSERT_EQ(model->analyzed.blocks.size(), 40u);
  const ReportData data =
      SolvedReport(*model, PresetPeakBytes(*model, "attn_only"), /*frontier_points=*/48);
  const std::string html = RenderReportHtml(data);
  std::cout << "wan2.1-14b report: " << html.size() << " bytes\n";
  ::testing::Test::RecordProperty("report_bytes", static_cast<int>(html.size()));
  EXPECT_LT(html.size(), 2'000'000u);
  EXPECT_EQ(Count(SvgById(html, "decision-map"), "class=\"mark cell\""),
            40 * model->analyzed.blocks[0].op_count());
}

}  // namespace
}  // namespace sacplan::testing
