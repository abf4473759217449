// The report's sections, each a self-contained piece of markup. Every chart
// is an <svg class="chart" data-chart="..."> whose data marks carry class
// "mark" (what the browser test counts), with axis titles (class
// "axis-label") and a legend (class "legend"). All text is escaped.
#ifndef SACPLAN_REPORTS_CHARTS_H_
#define SACPLAN_REPORTS_CHARTS_H_

#include <set>
#include <string>
#include <vector>

#include "sacplan/reports/report.h"

namespace sacplan::reports {

// Memory timeline of one step of `plan`: live bytes stacked by
// MemoryCategory over simulated time (ms), the budget line when
// budget_bytes > 0, and the peak marked with a label (class "peak-label",
// attribute data-op) naming its phase, block and op. The timeline is
// reduced to one value per pixel column, keeping each column's maximum, so
// the file size does not grow with the number of ops and the peak survives.
// Collectives show as ticks under the plot (class "collective"): the
// moments of ops named in `collective_ops` (sequence-parallel all-to-alls)
// and FSDP's all-gathers and reduce-scatters ("fsdp.*" moments). The FSDP
// buffers' area and legend entry appear only when a step has any.
std::string TimelineSvg(const ReportPlan& plan, int64_t budget_bytes,
                        const std::string& id,
                        const std::set<std::string>& collective_ops = {});

// Pareto frontier: simulated peak (GB) vs step time (ms) of the optimal
// plans, the presets as labelled points, the chosen plan (data.plans[0])
// highlighted, the budget as a vertical line, and each run log's predicted
// and measured points joined by a line.
std::string FrontierSvg(const ReportData& data);

// What a plan does with an op in a block.
enum class OpDecision {
  kSaved,       // outputs kept from forward to backward
  kOffloaded,   // outputs kept in host memory between forward and backward
  kRecomputed,  // re-run in backward
  kFreed,       // neither: backward does not read its outputs
};
inline constexpr int kOpDecisionCount = 4;
const char* OpDecisionName(OpDecision decision);  // "saved", ...

// decisions[block][op] for `plan`, by the rules schedule lowering applies.
std::vector<std::vector<OpDecision>> PlanDecisions(const AnalyzedModel& model,
                                                   const ReportPlan& plan);

// Blocks (rows) x ops (columns) grid of the plan's decisions; each cell's
// <title> gives the op, its output bytes and its recompute time.
std::string DecisionMapSvg(const AnalyzedModel& model, const ReportPlan& plan);

// Per-op table (ops of block 0; decisions counted over all blocks): kind,
// forward and backward ms, output bytes, recompute ms per GB freed,
// decision. Headers sort the table when clicked (data-sort on each cell).
std::string OpTableHtml(const AnalyzedModel& model, const ReportPlan& plan);

// One sentence on the chosen plan: whether it fits, its peak, and how much
// faster (or slower) it is than the fastest preset that fits the budget,
// e.g. "optimal fits in 28.93 GB (budget 40.00 GB) and is 6.1% faster than
// attention-only checkpointing (attn_only)." Plain text, not escaped.
std::string Verdict(const ReportData& data);

// Human name of a preset ("attention-only checkpointing"); the name itself
// for anything else.
std::string PresetDescription(const std::string& name);

}  // namespace sacplan::reports

#endif  // SACPLAN_REPORTS_CHARTS_H_
