#include <array>
#include <map>

#include "absl/strings/str_cat.h"
#include "sacplan/planner/ir/bytes.h"
#include "sacplan/reports/charts.h"
#include "sacplan/reports/html.h"

namespace sacplan::reports {
namespace {

// A cell that sorts by `key` (numeric when `numeric`) and shows `text`.
std::string Cell(const std::string& key, const std::string& text, bool numeric) {
  return absl::StrCat("<td data-sort=\"", EscapeHtml(key), "\"",
                      numeric ? " class=\"num\"" : "", ">", EscapeHtml(text), "</td>");
}

}  // namespace

std::string OpTableHtml(const AnalyzedModel& model, const ReportPlan& plan) {
  const std::vector<std::vector<OpDecision>> decisions = PlanDecisions(model, plan);
  // Per op id: how many blocks save, offload, recompute or drop it.
  std::map<std::string, std::array<int, kOpDecisionCount>> counts;
  for (size_t b = 0; b < decisions.size(); ++b) {
    for (size_t op = 0; op < decisions[b].size(); ++op) {
      ++counts[model.blocks[b].op_ids[op]][static_cast<int>(decisions[b][op])];
    }
  }
  std::string out =
      "<table class=\"op-table sortable\" id=\"op-table\"><thead><tr>"
      "<th data-type=\"text\">op</th><th data-type=\"text\">kind</th>"
      "<th data-type=\"num\">forward (ms)</th><th data-type=\"num\">backward (ms)</th>"
      "<th data-type=\"num\">output (MB)</th>"
      "<th data-type=\"num\" title=\"forward time to recompute the output, per GB "
      "the output would free\">recompute cost (ms per GB freed)</th>"
      "<th data-type=\"text\">decision (blocks)</th></tr></thead><tbody>";
  const Block& block = model.model->blocks.front();
  const BlockAnalysis& analysis = model.blocks.front();
  const int blocks = static_cast<int>(decisions.size());
  for (int op = 0; op < analysis.op_count(); ++op) {
    const OpNode& node = analysis.ops[op];
    const std::array<int, kOpDecisionCount>& c = counts[block.ops[op].id];
    std::string decision;
    // In OpDecision's order.
    const char* names[kOpDecisionCount] = {"saved", "offloaded", "recomputed", "not kept"};
    for (int k = 0; k < kOpDecisionCount; ++k) {
      if (c[k] == 0) continue;
      if (!decision.empty()) decision += ", ";
      absl::StrAppend(&decision, names[k], " ",
                      c[k] == blocks ? std::string("(all)") : absl::StrCat(c[k], "/", blocks));
    }
    const double ms_per_gb = node.output_bytes > 0 ? node.fwd_ms / (node.output_bytes / 1e9) : 0;
    absl::StrAppend(&out, "<tr>", Cell(block.ops[op].id, block.ops[op].id, false),
                    Cell(block.ops[op].kind, block.ops[op].kind, false),
                    Cell(Num(node.fwd_ms, 6), Num(node.fwd_ms, 3), true),
                    Cell(Num(node.bwd_ms, 6), Num(node.bwd_ms, 3), true),
                    Cell(absl::StrCat(node.output_bytes), Num(node.output_bytes / 1e6, 1), true),
                    Cell(Num(ms_per_gb, 6), Num(ms_per_gb, 3), true),
                    Cell(decision, decision, false), "</tr>");
  }
  absl::StrAppend(&out, "</tbody></table>");
  return out;
}

}  // namespace sacplan::reports
