#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sacplan/planner/ir/bytes.h"
#include "sacplan/reports/charts.h"

namespace sacplan::reports {

std::string PresetDescription(const std::string& name) {
  if (name == "none") return "no checkpointing";
  if (name == "full") return "full checkpointing";
  if (name == "torchtitan") return "TorchTitan's every-other-matmul policy";
  if (name == "attn_only") return "attention-only checkpointing";
  if (name == "megatron") return "Megatron selective recompute";
  if (absl::StartsWith(name, "every_nth:")) {
    return absl::StrCat("checkpointing every ", name.substr(10), "th block");
  }
  return name;
}

std::string Verdict(const ReportData& data) {
  if (data.plans.empty()) return "No plan to report.";
  const ReportPlan& chosen = data.plans.front();
  const int64_t peak = chosen.result.peak_bytes;
  const int64_t budget = data.budget_bytes;
  if (budget > 0 && peak > budget) {
    return absl::StrCat(chosen.name, " does not fit: it peaks at ", FormatBytes(peak),
                        ", ", FormatBytes(peak - budget), " over the budget of ",
                        FormatBytes(budget), ".");
  }
  std::string text = budget > 0
      ? absl::StrCat(chosen.name, " fits in ", FormatBytes(peak), " (budget ",
                     FormatBytes(budget), ")")
      : absl::StrCat(chosen.name, " peaks at ", FormatBytes(peak));
  absl::StrAppend(&text, " and steps in ", absl::StrFormat("%.0f", chosen.result.step_ms),
                  " ms");
  // The fastest preset that fits the same memory.
  const int64_t limit = budget > 0 ? budget : peak;
  const ReportPlan* reference = nullptr;
  const ReportPlan* smallest = nullptr;
  for (size_t i = 1; i < data.plans.size(); ++i) {
    const ReportPlan& p = data.plans[i];
    if (!p.preset) continue;
    if (smallest == nullptr || p.result.peak_bytes < smallest->result.peak_bytes) smallest = &p;
    if (p.result.peak_bytes > limit) continue;
    if (reference == nullptr || p.result.step_ms < reference->result.step_ms) reference = &p;
  }
  if (reference == nullptr) {
    if (smallest != nullptr) {
      absl::StrAppend(&text, "; no preset fits (the smallest, ",
                      PresetDescription(smallest->name), ", peaks at ",
                      FormatBytes(smallest->result.peak_bytes), ")");
    }
    return text + ".";
  }
  if (chosen.preset && chosen.name == reference->name) {
    return absl::StrCat(text, ", the fastest preset that fits.");
  }
  const double ref_ms = reference->result.step_ms;
  const double pct = ref_ms > 0 ? 100.0 * (ref_ms - chosen.result.step_ms) / ref_ms : 0;
  const std::string who = absl::StrCat(PresetDescription(reference->name), " (",
                                       reference->name, "), the fastest preset that fits");
  if (std::abs(pct) < 0.05) return absl::StrCat(text, ", as fast as ", who, ".");
  return absl::StrCat(text, ", ", absl::StrFormat("%.1f%%", std::abs(pct)),
                      pct > 0 ? " faster than " : " slower than ", who, ".");
}

}  // namespace sacplan::reports
