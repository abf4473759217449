#include <algorithm>
#include <cmath>
#include <set>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "sacplan/planner/ir/bytes.h"
#include "sacplan/reports/charts.h"
#include "sacplan/reports/html.h"
#include "svg.h"

namespace sacplan::reports {
namespace {

constexpr int kWidth = 1200;
constexpr int kHeight = 400;
constexpr int kHoverSlots = 300;
// Offload: two lanes under the axis title, one per copy engine.
constexpr int kCopyLanesHeight = 40;

std::string DescribeWhere(const StepLocation& where) {
  std::string text = PhaseName(where.phase);
  if (where.block >= 0) absl::StrAppend(&text, ", block ", where.block);
  if (!where.op.empty()) absl::StrAppend(&text, ", ", where.op);
  return text;
}

// For each of `columns` equal slices of [0, step_ms], the index of the
// timeline point with the most live bytes among the moments overlapping it.
// Point i covers (time of point i-1, time of point i].
std::vector<int> ColumnMaxima(const std::vector<TimelinePoint>& timeline,
                              double step_ms, int columns) {
  std::vector<int> best(columns, -1);
  double start_ms = 0;
  for (int i = 0; i < static_cast<int>(timeline.size()); ++i) {
    const double end_ms = timeline[i].time_ms;
    const auto column = [&](double t) {
      const int c = static_cast<int>(std::floor(t / step_ms * columns));
      return std::clamp(c, 0, columns - 1);
    };
    // A moment that takes no time still lands in its column.
    const int first = column(std::min(start_ms, end_ms));
    const int last = end_ms > start_ms ? column(std::nextafter(end_ms, 0.0)) : first;
    for (int c = first; c <= std::max(first, last); ++c) {
      if (best[c] < 0 || timeline[i].total_bytes > timeline[best[c]].total_bytes) {
        best[c] = i;
      }
    }
    start_ms = end_ms;
  }
  // Columns no moment reached (none, unless step_ms is off) copy a neighbour.
  for (int c = 1; c < columns; ++c) {
    if (best[c] < 0) best[c] = best[c - 1];
  }
  for (int c = columns - 2; c >= 0; --c) {
    if (best[c] < 0) best[c] = best[c + 1];
  }
  return best;
}

// Ticks under the plot at the moments collectives run, one per pixel column.
std::string CollectiveTicks(const std::vector<TimelinePoint>& timeline,
                            const std::set<std::string>& collective_ops,
                            const PlotFrame& f) {
  std::string out = "<g class=\"collectives\">";
  std::set<int> columns;
  double start_ms = 0;
  for (const TimelinePoint& p : timeline) {
    const double mid_ms = (start_ms + p.time_ms) / 2;
    start_ms = p.time_ms;
    const bool fsdp = p.where.op.rfind("fsdp.", 0) == 0;
    if (!fsdp && collective_ops.count(p.where.op) == 0) continue;
    const int x = static_cast<int>(std::lround(f.X(mid_ms)));
    if (!columns.insert(x).second) continue;
    absl::StrAppend(&out, "<line class=\"mark collective\" x1=\"", x, "\" x2=\"", x,
                    "\" y1=\"", Num(f.bottom() + 2, 1), "\" y2=\"", Num(f.bottom() + 8, 1),
                    "\" stroke=\"", palette::kPurple, "\"><title>",
                    EscapeHtml(DescribeWhere(p.where)), "</title></line>");
  }
  absl::StrAppend(&out, "</g>");
  return out;
}

// The copy engines' work under the plot: one lane to the host, one back,
// a bar per copy (its block, tensor, bytes and span in the title).
std::string CopyLanes(const std::vector<CopySpan>& copies, const PlotFrame& f) {
  std::string out = "<g class=\"copy-lanes\">";
  for (const bool to_host : {true, false}) {
    const double y = f.bottom() + (to_host ? 46 : 62);
    absl::StrAppend(&out, "<text class=\"tick\" x=\"", Num(f.left - 6, 1), "\" y=\"",
                    Num(y + 8, 1), "\" text-anchor=\"end\">",
                    to_host ? "to host" : "to device", "</text>");
    for (const CopySpan& copy : copies) {
      if (copy.to_host != to_host) continue;
      const double x = f.X(copy.start_ms);
      const double width = std::max(1.0, f.X(copy.end_ms) - x);
      absl::StrAppend(
          &out, "<rect class=\"mark copy ", to_host ? "to-host" : "to-device", "\" x=\"",
          Num(x, 1), "\" y=\"", Num(y, 1), "\" width=\"", Num(width, 1),
          "\" height=\"10\" fill=\"", to_host ? palette::kBlack : palette::kPurple,
          "\"><title>block ", copy.block, " ", EscapeHtml(copy.tensor), ": ",
          EscapeHtml(FormatBytes(copy.bytes)), to_host ? " to the host, " : " back, ",
          Num(copy.start_ms, 1), "-", Num(copy.end_ms, 1), " ms</title></rect>");
    }
  }
  absl::StrAppend(&out, "</g>");
  return out;
}

}  // namespace

std::string TimelineSvg(const ReportPlan& plan, int64_t budget_bytes,
                        const std::string& id,
                        const std::set<std::string>& collective_ops) {
  const StepResult& result = plan.result;
  const std::vector<TimelinePoint>& timeline = result.timeline;
  PlotFrame f;
  f.left = 80;
  f.top = 56;
  f.width = kWidth - f.left - 24;
  f.height = kHeight - f.top - 50;
  double step_ms = result.step_ms;
  if (!timeline.empty()) step_ms = std::max(step_ms, timeline.back().time_ms);
  if (!(step_ms > 0)) step_ms = 1;
  f.x_hi = step_ms;
  int64_t host_peak_bytes = 0;
  for (const TimelinePoint& p : timeline) host_peak_bytes = std::max(host_peak_bytes, p.host_bytes);
  const double top_gb = std::max({result.peak_bytes, budget_bytes, host_peak_bytes}) / 1e9;
  f.y_hi = top_gb > 0 ? top_gb * 1.1 : 1;

  const bool has_copies = !result.copies.empty();
  std::string out = SvgOpen(id, "timeline", kWidth,
                            kHeight + (has_copies ? kCopyLanesHeight : 0),
                            absl::StrCat("memory timeline of ", plan.name));
  absl::StrAppend(&out, Axes(f, "simulated step time (ms)", 0,
                             "live memory (GB)", f.y_hi < 5 ? 2 : 0));

  // Legend: categories in stacking order, bottom first.
  absl::StrAppend(&out, "<g class=\"legend\">");
  double lx = f.left;
  bool has_fsdp = false;
  for (const TimelinePoint& p : timeline) {
    has_fsdp = has_fsdp || p.bytes[static_cast<int>(MemoryCategory::kFsdpBuffers)] > 0;
  }
  for (int c = 0; c < kMemoryCategoryCount; ++c) {
    const auto category = static_cast<MemoryCategory>(c);
    if (category == MemoryCategory::kFsdpBuffers && !has_fsdp) continue;
    if (c == 4) lx = f.left;  // two rows: four, then the rest
    absl::StrAppend(&out, LegendItem(lx, c < 4 ? 16 : 36, "rect", CategoryColor(category),
                                     CategoryLabel(category)));
  }
  if (host_peak_bytes > 0) {
    absl::StrAppend(&out, LegendItem(lx, 36, "line", palette::kBlack,
                                     "host memory (offload; not on the device)"));
  }
  absl::StrAppend(&out, "</g>");

  const int columns = static_cast<int>(f.width);
  std::vector<int> column_point;
  if (!timeline.empty()) column_point = ColumnMaxima(timeline, step_ms, columns);

  // Stacked areas as cumulative step paths, topmost category first so that
  // each lower one paints over it: every path needs only its upper edge.
  absl::StrAppend(&out, "<g class=\"areas\">");
  for (int c = kMemoryCategoryCount - 1; c >= 0 && !column_point.empty(); --c) {
    const auto category = static_cast<MemoryCategory>(c);
    if (category == MemoryCategory::kFsdpBuffers && !has_fsdp) continue;
    std::string d = absl::StrCat("M", Num(f.left, 0), " ", Num(f.bottom(), 1));
    std::string last_y;
    for (int col = 0; col < columns; ++col) {
      const TimelinePoint& p = timeline[column_point[col]];
      int64_t cumulative = 0;
      for (int k = 0; k <= c; ++k) cumulative += p.bytes[k];
      const std::string y = Num(f.Y(cumulative / 1e9), 1);
      if (y != last_y) {
        absl::StrAppend(&d, "V", y);
        last_y = y;
      }
      absl::StrAppend(&d, "H", Num(f.left + col + 1, 0));
    }
    absl::StrAppend(&d, "V", Num(f.bottom(), 1), "Z");
    absl::StrAppend(&out, "<path class=\"mark area\" data-category=\"",
                    MemoryCategoryName(category), "\" fill=\"",
                    CategoryColor(category), "\" d=\"", d, "\"><title>",
                    EscapeHtml(CategoryLabel(category)), "</title></path>");
  }
  absl::StrAppend(&out, "</g>");
  // Offload: the host's bytes as a line over the device's areas.
  if (host_peak_bytes > 0 && !column_point.empty()) {
    std::string d = absl::StrCat("M", Num(f.left, 0), " ", Num(f.bottom(), 1));
    for (int col = 0; col < columns; ++col) {
      const TimelinePoint& p = timeline[column_point[col]];
      absl::StrAppend(&d, "V", Num(f.Y(p.host_bytes / 1e9), 1), "H", Num(f.left + col + 1, 0));
    }
    absl::StrAppend(&out, "<path class=\"mark host-line\" fill=\"none\" stroke=\"",
                    palette::kBlack, "\" stroke-dasharray=\"6 3\" d=\"", d,
                    "\"><title>host memory (offload)</title></path>");
  }
  absl::StrAppend(&out, CollectiveTicks(timeline, collective_ops, f));
  if (has_copies) absl::StrAppend(&out, CopyLanes(result.copies, f));

  if (budget_bytes > 0) {
    const std::string y = Num(f.Y(budget_bytes / 1e9), 1);
    absl::StrAppend(&out, "<line class=\"mark budget-line\" x1=\"", Num(f.left, 1),
                    "\" x2=\"", Num(f.right(), 1), "\" y1=\"", y, "\" y2=\"", y,
                    "\"/><text class=\"budget-label\" x=\"", Num(f.right() - 4, 1),
                    "\" y=\"", y, "\" dy=\"-5\" text-anchor=\"end\">budget ",
                    EscapeHtml(FormatBytes(budget_bytes)), "</text>");
  }

  // The peak: the first moment that reaches it, as the simulator reports.
  for (size_t i = 0; i < timeline.size(); ++i) {
    if (timeline[i].total_bytes != result.peak_bytes) continue;
    const double start_ms = i == 0 ? 0 : timeline[i - 1].time_ms;
    const double x = f.X((start_ms + timeline[i].time_ms) / 2);
    const double y = f.Y(result.peak_bytes / 1e9);
    const bool right_half = x > f.left + f.width * 0.6;
    absl::StrAppend(
        &out, "<circle class=\"mark peak\" cx=\"", Num(x, 1), "\" cy=\"",
        Num(y, 1), "\" r=\"6\"/><text class=\"peak-label\" data-op=\"",
        EscapeHtml(result.peak.op), "\" x=\"", Num(x + (right_half ? -10 : 10), 1),
        "\" y=\"", Num(std::max(f.top + 12, y - 10), 1), "\" text-anchor=\"",
        right_half ? "end" : "start", "\">peak ",
        EscapeHtml(FormatBytes(result.peak_bytes)), ": ",
        EscapeHtml(DescribeWhere(result.peak)), "</text>");
    break;
  }

  // Hover: a few hundred slots of (ms, GB, where), read by the page script.
  nlohmann::json hover = nlohmann::json::array();
  for (int s = 0; s < kHoverSlots && !column_point.empty(); ++s) {
    int best = -1;
    for (int col = s * columns / kHoverSlots; col < (s + 1) * columns / kHoverSlots; ++col) {
      const int p = column_point[col];
      if (best < 0 || timeline[p].total_bytes > timeline[best].total_bytes) best = p;
    }
    if (best < 0) best = column_point[std::min(columns - 1, s * columns / kHoverSlots)];
    const TimelinePoint& p = timeline[best];
    hover.push_back({std::round(p.time_ms * 10) / 10,
                     std::round(p.total_bytes / 1e7) / 100, DescribeWhere(p.where)});
  }
  absl::StrAppend(&out, "<g class=\"hover\" data-left=\"", Num(f.left, 1),
                  "\" data-width=\"", Num(f.width, 1), "\" data-top=\"",
                  Num(f.top, 1), "\" data-bottom=\"", Num(f.bottom(), 1),
                  "\" data-slots=\"", EscapeHtml(hover.dump()),
                  "\"><line class=\"hover-line\" x1=\"0\" x2=\"0\" y1=\"",
                  Num(f.top, 1), "\" y2=\"", Num(f.bottom(), 1),
                  "\" visibility=\"hidden\"/><text class=\"hover-text\" x=\"",
                  Num(f.left + 8, 1), "\" y=\"", Num(f.top + 16, 1),
                  "\"></text></g>");
  absl::StrAppend(&out, "</svg>");
  return out;
}

}  // namespace sacplan::reports
