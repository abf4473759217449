#include <algorithm>

#include "absl/strings/str_cat.h"
#include "sacplan/planner/ir/bytes.h"
#include "sacplan/reports/charts.h"
#include "sacplan/reports/html.h"
#include "svg.h"

namespace sacplan::reports {
namespace {

const char* DecisionColor(OpDecision decision) {
  switch (decision) {
    case OpDecision::kSaved: return palette::kBlue;
    case OpDecision::kOffloaded: return palette::kGreen;
    case OpDecision::kRecomputed: return palette::kOrange;
    case OpDecision::kFreed: return palette::kLightGrey;
  }
  return palette::kGrey;
}

}  // namespace

const char* OpDecisionName(OpDecision decision) {
  switch (decision) {
    case OpDecision::kSaved: return "saved";
    case OpDecision::kOffloaded: return "offloaded (saved in host memory)";
    case OpDecision::kRecomputed: return "recomputed";
    case OpDecision::kFreed: return "not kept (backward does not read it)";
  }
  return "unknown";
}

std::vector<std::vector<OpDecision>> PlanDecisions(const AnalyzedModel& model,
                                                   const ReportPlan& plan) {
  std::vector<std::vector<OpDecision>> decisions;
  for (size_t b = 0; b < model.blocks.size() && b < plan.masks.size(); ++b) {
    const BlockAnalysis& block = model.blocks[b];
    const BlockSchedule schedule = LowerBlock(block, plan.masks[b], plan.semantics);
    std::vector<OpDecision> row(block.ops.size(), OpDecision::kFreed);
    for (int op = 0; op < block.op_count(); ++op) {
      if (plan.masks[b][op] || block.ops[op].collective) row[op] = OpDecision::kSaved;
    }
    if (b < plan.offloaded.size() && !plan.offloaded[b].empty()) {
      for (int op = 0; op < block.op_count(); ++op) {
        for (int out : block.ops[op].outputs) {
          if (plan.offloaded[b][out] && schedule.kept[out]) row[op] = OpDecision::kOffloaded;
        }
      }
    }
    for (const ScheduleStep& step : schedule.backward) {
      if (step.kind == StepKind::kRecompute) row[step.op] = OpDecision::kRecomputed;
    }
    decisions.push_back(std::move(row));
  }
  return decisions;
}

std::string DecisionMapSvg(const AnalyzedModel& model, const ReportPlan& plan) {
  const std::vector<std::vector<OpDecision>> decisions = PlanDecisions(model, plan);
  const int rows = static_cast<int>(decisions.size());
  int columns = 1;
  for (const BlockAnalysis& block : model.blocks) columns = std::max(columns, block.op_count());
  const double left = 80, top = 150;
  const double cell_w = std::clamp(1090.0 / columns, 12.0, 60.0);
  const double cell_h = std::clamp(520.0 / std::max(rows, 1), 8.0, 18.0);
  const int width = 1200;
  const int height = static_cast<int>(top + rows * cell_h + 30);

  std::string out = SvgOpen("decision-map", "decisions", width, height,
                            absl::StrCat("save or recompute decisions of ", plan.name));
  absl::StrAppend(&out, "<g class=\"legend\">");
  double lx = left;
  for (OpDecision d : {OpDecision::kSaved, OpDecision::kOffloaded, OpDecision::kRecomputed,
                       OpDecision::kFreed}) {
    absl::StrAppend(&out, LegendItem(lx, 16, "rect", DecisionColor(d), OpDecisionName(d)));
  }
  absl::StrAppend(&out, "</g>");

  // Column titles: block 0's op ids, slanted.
  const Block& first = model.model->blocks.front();
  absl::StrAppend(&out, "<g class=\"column-labels\">");
  for (int op = 0; op < static_cast<int>(first.ops.size()); ++op) {
    const std::string x = Num(left + (op + 0.5) * cell_w, 1);
    const std::string y = Num(top - 6, 1);
    absl::StrAppend(&out, "<text class=\"op-label\" x=\"", x, "\" y=\"", y,
                    "\" transform=\"rotate(-55 ", x, " ", y, ")\">",
                    EscapeHtml(first.ops[op].id), "</text>");
  }
  absl::StrAppend(&out, "</g><text class=\"axis-label\" x=\"", Num(left - 60, 1),
                  "\" y=\"", Num(top - 10, 1), "\">block</text>");

  absl::StrAppend(&out, "<g class=\"cells\">");
  const int label_every = rows <= 24 ? 1 : (rows <= 60 ? 5 : 10);
  for (int b = 0; b < rows; ++b) {
    const Block& block = model.model->blocks[b];
    const BlockAnalysis& analysis = model.blocks[b];
    const double y = top + b * cell_h;
    if (b % label_every == 0 || b == rows - 1) {
      absl::StrAppend(&out, "<text class=\"tick\" x=\"", Num(left - 6, 1), "\" y=\"",
                      Num(y + cell_h / 2 + 4, 1), "\" text-anchor=\"end\">", b,
                      "</text>");
    }
    for (int op = 0; op < analysis.op_count(); ++op) {
      const OpDecision d = decisions[b][op];
      const OpNode& node = analysis.ops[op];
      absl::StrAppend(
          &out, "<rect class=\"mark cell\" data-decision=\"",
          d == OpDecision::kFreed ? "freed" : OpDecisionName(d), "\" x=\"",
          Num(left + op * cell_w, 1), "\" y=\"", Num(y, 1), "\" width=\"",
          Num(cell_w - 1, 1), "\" height=\"", Num(cell_h - 1, 1), "\" fill=\"",
          DecisionColor(d), "\"><title>block ", b, " ",
          EscapeHtml(block.ops[op].id), " (", EscapeHtml(block.ops[op].kind),
          "): ", OpDecisionName(d), "; output ",
          EscapeHtml(FormatBytes(node.output_bytes)), "; recompute ",
          Num(node.fwd_ms, 3), " ms</title></rect>");
    }
  }
  absl::StrAppend(&out, "</g></svg>");
  return out;
}

}  // namespace sacplan::reports
