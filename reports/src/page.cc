// Assembles the report page from its sections.
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sacplan/planner/ir/bytes.h"
#include "sacplan/reports/charts.h"
#include "sacplan/reports/html.h"
#include "sacplan/reports/report.h"
#include "page_assets.h"

namespace sacplan::reports {
namespace {

std::string WithThousands(int64_t value) {
  std::string digits = absl::StrCat(value < 0 ? -value : value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

std::string Fact(const std::string& name, const std::string& value) {
  return absl::StrCat("<span class=\"fact\">", EscapeHtml(name), " <b>",
                      EscapeHtml(value), "</b></span> &middot; ");
}

std::string Header(const ReportData& data) {
  const Profile& profile = *data.profile;
  std::string facts;
  absl::StrAppend(&facts, Fact("model", profile.model_name));
  absl::StrAppend(&facts, Fact("device", profile.device));
  if (profile.model_config.is_object() && profile.model_config.contains("tokens") &&
      profile.model_config["tokens"].is_number_integer()) {
    absl::StrAppend(&facts, Fact("tokens", WithThousands(
                                               profile.model_config["tokens"].get<int64_t>())));
  }
  absl::StrAppend(&facts, Fact("blocks", absl::StrCat(data.model->blocks.size())));
  if (const std::string ranks = DescribeRanks(data.model->model->parallel); !ranks.empty()) {
    absl::StrAppend(&facts, Fact("memory and time", ranks));
  }
  absl::StrAppend(&facts, Fact("budget", data.budget_bytes > 0
                                             ? absl::StrCat(FormatBytes(data.budget_bytes), " ",
                                                            BudgetKindName(data.budget_kind))
                                             : std::string("none given")));
  absl::StrAppend(&facts, Fact("semantics", SemanticsName(data.semantics)));
  absl::StrAppend(&facts, "<span class=\"fact\">profile source <b>",
                  EscapeHtml(profile.source), "</b></span>");
  return absl::StrCat("<header><h1>sacplan report: ", EscapeHtml(profile.model_name),
                      " on ", EscapeHtml(profile.device), "</h1><p class=\"facts\">", facts,
                      "</p><p class=\"verdict\" id=\"verdict\">", EscapeHtml(Verdict(data)),
                      "</p></header>");
}

std::string TimelineSection(const ReportData& data) {
  std::string out =
      "<section id=\"timeline-section\"><h2>Memory timeline of one training step</h2>"
      "<p class=\"note\">Live bytes as the simulator models them, stacked by what they "
      "are for, over the simulated time of one step (forward, head, backward with "
      "recompute, optimizer). Each pixel column shows the largest moment inside it. "
      "Hover for the moment under the pointer; pick a plan below.</p><div class=\"toggles\">";
  for (size_t i = 0; i < data.plans.size(); ++i) {
    absl::StrAppend(&out, "<button type=\"button\" data-target=\"timeline-wrap-", i,
                    "\" aria-pressed=\"", i == 0 ? "true" : "false", "\">",
                    EscapeHtml(data.plans[i].name), i == 0 ? " (chosen)" : "", "</button>");
  }
  absl::StrAppend(&out, "</div>");
  std::set<std::string> collective_ops;
  for (const Block& block : data.model->model->blocks) {
    for (const Op& op : block.ops) {
      if (op.collective) collective_ops.insert(op.id);
    }
  }
  for (size_t i = 0; i < data.plans.size(); ++i) {
    const ReportPlan& plan = data.plans[i];
    std::string comm =
        plan.result.comm_ms > 0
            ? absl::StrCat(", FSDP collectives ", Num(plan.result.comm_ms, 1), " ms exposed")
            : std::string();
    if (plan.result.offloaded_bytes > 0) {
      absl::StrAppend(&comm, ", offload ", EscapeHtml(FormatBytes(plan.result.offloaded_bytes)),
                      " to the host (host peak ",
                      EscapeHtml(FormatBytes(plan.result.host_peak_bytes)), "), copies ",
                      Num(plan.result.exposed_copy_ms, 1), " ms exposed");
    }
    absl::StrAppend(&out, "<div class=\"timeline-wrap\" id=\"timeline-wrap-", i,
                    "\" data-plan=\"", EscapeHtml(plan.name), "\"", i == 0 ? "" : " hidden",
                    "><p class=\"note\"><b>", EscapeHtml(plan.name), "</b> (",
                    EscapeHtml(plan.origin), ", ", SemanticsName(plan.semantics),
                    "): peak ", EscapeHtml(FormatBytes(plan.result.peak_bytes)),
                    " allocated, ", EscapeHtml(FormatBytes(plan.reserved_peak_bytes)),
                    " reserved, step ",
                    Num(plan.result.step_ms, 1), " ms, recompute ",
                    Num(plan.result.recompute_ms, 1), " ms", comm, "</p>",
                    TimelineSvg(plan, data.budget_bytes, absl::StrCat("timeline-", i),
                                collective_ops),
                    "</div>");
  }
  absl::StrAppend(&out, "</section>");
  return out;
}

std::string PercentError(double predicted, double measured) {
  return absl::StrFormat("%+.1f%%", 100.0 * (measured - predicted) / predicted);
}

std::string FrontierSection(const ReportData& data) {
  std::string out = absl::StrCat(
      "<section id=\"frontier-section\"><h2>Pareto frontier: peak memory vs step time</h2>"
      "<p class=\"note\">Every optimal plan from the smallest feasible peak to the fastest "
      "step (",
      data.frontier.size(),
      " plans, blue), today's fixed policies (orange squares) and the chosen plan "
      "(ring). Below a frontier point's peak no plan is as fast.</p>",
      FrontierSvg(data));
  if (!data.runs.empty()) {
    absl::StrAppend(&out,
                    "<table class=\"runs\"><thead><tr><th>run</th><th>file</th>"
                    "<th>predicted peak</th><th>measured peak</th><th>error</th>"
                    "<th>predicted step (ms)</th><th>measured step (ms)</th><th>error</th>"
                    "<th>losses logged</th></tr></thead><tbody>");
    for (const RunLog& r : data.runs) {
      absl::StrAppend(
          &out, "<tr><td>", EscapeHtml(r.label), "</td><td>", EscapeHtml(r.path),
          "</td><td class=\"num\">", EscapeHtml(FormatBytes(r.predicted_peak_bytes)),
          "</td><td class=\"num\">", EscapeHtml(FormatBytes(r.measured_peak_bytes)),
          "</td><td class=\"num\">",
          PercentError(r.predicted_peak_bytes, r.measured_peak_bytes),
          "</td><td class=\"num\">", Num(r.predicted_step_ms, 1), "</td><td class=\"num\">",
          Num(r.measured_step_ms, 1), "</td><td class=\"num\">",
          PercentError(r.predicted_step_ms, r.measured_step_ms), "</td><td class=\"num\">",
          r.loss_count, "</td></tr>");
    }
    absl::StrAppend(&out, "</tbody></table>");
  }
  absl::StrAppend(&out, "</section>");
  return out;
}

std::string PlansSection(const ReportData& data) {
  std::string out =
      "<section id=\"plans-section\"><h2>Plans compared</h2><table class=\"plans\">"
      "<thead><tr><th>plan</th><th>from</th><th>peak</th><th>reserved</th><th>fits</th>"
      "<th>step (ms)</th>"
      "<th>recompute (ms)</th><th>peak reached in</th></tr></thead><tbody>";
  for (const ReportPlan& p : data.plans) {
    std::string where = PhaseName(p.result.peak.phase);
    if (p.result.peak.block >= 0) absl::StrAppend(&where, ", block ", p.result.peak.block);
    if (!p.result.peak.op.empty()) absl::StrAppend(&where, ", ", p.result.peak.op);
    const int64_t capped = data.budget_kind == BudgetKind::kReserved ? p.reserved_peak_bytes
                                                                     : p.result.peak_bytes;
    const char* fits = data.budget_bytes <= 0 ? "-" : capped <= data.budget_bytes ? "yes" : "no";
    absl::StrAppend(&out, "<tr><td>", EscapeHtml(p.name), "</td><td>", EscapeHtml(p.origin),
                    "</td><td class=\"num\">", EscapeHtml(FormatBytes(p.result.peak_bytes)),
                    "</td><td class=\"num\">", EscapeHtml(FormatBytes(p.reserved_peak_bytes)),
                    "</td><td>", fits, "</td><td class=\"num\">", Num(p.result.step_ms, 1),
                    "</td><td class=\"num\">", Num(p.result.recompute_ms, 1), "</td><td>",
                    EscapeHtml(where), "</td></tr>");
  }
  absl::StrAppend(&out, "</tbody></table></section>");
  return out;
}

}  // namespace

std::string RenderReportHtml(const ReportData& data) {
  std::string page = absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
      "<title>sacplan report: ",
      EscapeHtml(data.profile->model_name), "</title><style>", kReportCss,
      "</style></head><body>\n", Header(data), "\n", TimelineSection(data), "\n",
      FrontierSection(data), "\n");
  if (!data.plans.empty()) {
    const ReportPlan& chosen = data.plans.front();
    absl::StrAppend(
        &page, "<section id=\"decision-section\"><h2>Decision map: ",
        EscapeHtml(chosen.name),
        "</h2><p class=\"note\">Blocks (rows) by ops (columns): which outputs the plan "
        "keeps for backward, which backward recomputes, and which it needs neither way. "
        "Hover a cell for its output size and recompute time.</p>",
        DecisionMapSvg(*data.model, chosen), "</section>\n",
        "<section id=\"op-section\"><h2>Per-op costs and decisions</h2><p class=\"note\">"
        "Ops of block 0; decisions counted over all blocks. Click a header to sort.</p>",
        OpTableHtml(*data.model, chosen), "</section>\n");
  }
  absl::StrAppend(&page, PlansSection(data), "\n<pre id=\"selfcheck\"></pre>\n<script>",
                  kReportJs, "</script>\n</body></html>\n");
  return page;
}

}  // namespace sacplan::reports
