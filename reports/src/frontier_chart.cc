#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "sacplan/planner/ir/bytes.h"
#include "sacplan/reports/charts.h"
#include "sacplan/reports/html.h"
#include "svg.h"

namespace sacplan::reports {
namespace {

constexpr int kWidth = 1200;
constexpr int kHeight = 460;

std::string PointTitle(const std::string& what, int64_t peak_bytes, double step_ms) {
  return absl::StrCat("<title>", EscapeHtml(what), ": peak ",
                      EscapeHtml(FormatBytes(peak_bytes)), ", step ",
                      Num(step_ms, 1), " ms</title>");
}

std::string Diamond(const std::string& cls, double x, double y, double r,
                    const std::string& fill) {
  return absl::StrCat("<path class=\"", cls, "\" d=\"M", Num(x, 1), " ",
                      Num(y - r, 1), "l", Num(r, 1), " ", Num(r, 1), "l-",
                      Num(r, 1), " ", Num(r, 1), "l-", Num(r, 1), " -",
                      Num(r, 1), "z\" fill=\"", fill, "\">");
}

std::string Triangle(const std::string& cls, double x, double y, double r,
                     const std::string& fill, const std::string& stroke) {
  return absl::StrCat("<path class=\"", cls, "\" d=\"M", Num(x, 1), " ",
                      Num(y - r, 1), "l", Num(r, 1), " ", Num(1.7 * r, 1), "h-",
                      Num(2 * r, 1), "z\" fill=\"", fill, "\" stroke=\"", stroke,
                      "\" stroke-width=\"2\">");
}

}  // namespace

std::string FrontierSvg(const ReportData& data) {
  double x_lo = std::numeric_limits<double>::max(), x_hi = 0;
  double y_lo = std::numeric_limits<double>::max(), y_hi = 0;
  const auto include = [&](int64_t peak_bytes, double step_ms) {
    x_lo = std::min(x_lo, peak_bytes / 1e9);
    x_hi = std::max(x_hi, peak_bytes / 1e9);
    y_lo = std::min(y_lo, step_ms);
    y_hi = std::max(y_hi, step_ms);
  };
  for (const FrontierPoint& p : data.frontier) include(p.peak_bytes, p.step_ms);
  for (const ReportPlan& p : data.plans) include(p.result.peak_bytes, p.result.step_ms);
  for (const RunLog& r : data.runs) {
    include(r.predicted_peak_bytes, r.predicted_step_ms);
    include(r.measured_peak_bytes, r.measured_step_ms);
  }
  if (data.budget_bytes > 0) {
    x_lo = std::min(x_lo, data.budget_bytes / 1e9);
    x_hi = std::max(x_hi, data.budget_bytes / 1e9);
  }
  if (x_hi <= x_lo) x_hi = x_lo + 1;
  if (y_hi <= y_lo) y_hi = y_lo + 1;
  PlotFrame f;
  f.left = 80;
  f.top = 56;
  f.width = kWidth - f.left - 24;
  f.height = kHeight - f.top - 50;
  const double x_pad = (x_hi - x_lo) * 0.06, y_pad = (y_hi - y_lo) * 0.08;
  f.x_lo = std::max(0.0, x_lo - x_pad);
  f.x_hi = x_hi + x_pad;
  f.y_lo = std::max(0.0, y_lo - y_pad);
  f.y_hi = y_hi + y_pad;

  std::string out = SvgOpen("frontier", "frontier", kWidth, kHeight,
                            "Pareto frontier of peak memory and step time");
  absl::StrAppend(&out, Axes(f, "simulated peak memory (GB)",
                             f.x_hi - f.x_lo < 5 ? 2 : (f.x_hi - f.x_lo < 50 ? 1 : 0),
                             "simulated step time (ms)", 0));

  absl::StrAppend(&out, "<g class=\"legend\">");
  double lx = f.left;
  absl::StrAppend(&out, LegendItem(lx, 16, "circle", palette::kBlue, "optimal plans (frontier)"));
  absl::StrAppend(&out, LegendItem(lx, 16, "square", palette::kOrange, "presets"));
  absl::StrAppend(&out, LegendItem(lx, 16, "ring", palette::kVermillion, "chosen plan"));
  if (data.plans.size() > 1 && !data.plans[1].preset) {
    absl::StrAppend(&out, LegendItem(lx, 16, "diamond", palette::kPurple, "other given plans"));
  }
  if (data.budget_bytes > 0) {
    absl::StrAppend(&out, LegendItem(lx, 16, "dash", palette::kBlack, "budget"));
  }
  if (!data.runs.empty()) {
    lx = f.left;
    absl::StrAppend(&out, LegendItem(lx, 36, "triangle", palette::kGreen, "measured run"));
    absl::StrAppend(&out, LegendItem(lx, 36, "triangle", palette::kSkyBlue,
                                     "its prediction (hollow)"));
  }
  absl::StrAppend(&out, "</g>");

  if (data.budget_bytes > 0) {
    const std::string x = Num(f.X(data.budget_bytes / 1e9), 1);
    absl::StrAppend(&out, "<line class=\"mark budget-line\" x1=\"", x, "\" x2=\"", x,
                    "\" y1=\"", Num(f.top, 1), "\" y2=\"", Num(f.bottom(), 1),
                    "\"/><text class=\"budget-label\" x=\"", x, "\" dx=\"4\" y=\"",
                    Num(f.top + 14, 1), "\">budget ",
                    EscapeHtml(FormatBytes(data.budget_bytes)), "</text>");
  }

  // The frontier as a staircase: below a point's peak, that plan is not
  // available; from it on, its step time is.
  if (!data.frontier.empty()) {
    std::string d;
    for (size_t i = 0; i < data.frontier.size(); ++i) {
      const FrontierPoint& p = data.frontier[i];
      if (i == 0) {
        absl::StrAppend(&d, "M", Num(f.X(p.peak_bytes / 1e9), 1), " ",
                        Num(f.Y(p.step_ms), 1));
      } else {
        absl::StrAppend(&d, "H", Num(f.X(p.peak_bytes / 1e9), 1), "V",
                        Num(f.Y(p.step_ms), 1));
      }
    }
    absl::StrAppend(&d, "H", Num(f.right(), 1));
    absl::StrAppend(&out, "<path class=\"mark frontier-line\" d=\"", d, "\"/>");
    absl::StrAppend(&out, "<g class=\"frontier-points\">");
    for (const FrontierPoint& p : data.frontier) {
      absl::StrAppend(&out, "<circle class=\"mark frontier-point\" cx=\"",
                      Num(f.X(p.peak_bytes / 1e9), 1), "\" cy=\"",
                      Num(f.Y(p.step_ms), 1), "\" r=\"3.5\">",
                      PointTitle("optimal plan", p.peak_bytes, p.step_ms),
                      "</circle>");
    }
    absl::StrAppend(&out, "</g>");
  }

  // Presets and given plans, labelled; labels alternate above and below so
  // that neighbours do not collide.
  int label_index = 0;
  for (size_t i = 1; i < data.plans.size(); ++i) {
    const ReportPlan& p = data.plans[i];
    const double x = f.X(p.result.peak_bytes / 1e9), y = f.Y(p.result.step_ms);
    if (p.preset) {
      absl::StrAppend(&out, "<rect class=\"mark preset\" x=\"", Num(x - 5, 1),
                      "\" y=\"", Num(y - 5, 1), "\" width=\"10\" height=\"10\">",
                      PointTitle(p.name, p.result.peak_bytes, p.result.step_ms),
                      "</rect>");
    } else {
      absl::StrAppend(&out, Diamond("mark given", x, y, 7, palette::kPurple),
                      PointTitle(p.name, p.result.peak_bytes, p.result.step_ms),
                      "</path>");
    }
    const bool left = x > f.left + f.width * 0.8;
    absl::StrAppend(&out, "<text class=\"point-label\" x=\"", Num(x + (left ? -9 : 9), 1),
                    "\" y=\"", Num(y + (label_index % 2 == 0 ? -8 : 16), 1),
                    "\" text-anchor=\"", left ? "end" : "start", "\">",
                    EscapeHtml(p.name), "</text>");
    ++label_index;
  }

  for (const RunLog& r : data.runs) {
    const double px = f.X(r.predicted_peak_bytes / 1e9), py = f.Y(r.predicted_step_ms);
    const double mx = f.X(r.measured_peak_bytes / 1e9), my = f.Y(r.measured_step_ms);
    absl::StrAppend(&out, "<line class=\"run-link\" x1=\"", Num(px, 1), "\" y1=\"",
                    Num(py, 1), "\" x2=\"", Num(mx, 1), "\" y2=\"", Num(my, 1), "\"/>");
    absl::StrAppend(&out, Triangle("mark run-predicted", px, py, 7, "none", palette::kSkyBlue),
                    PointTitle(r.label + " (predicted)", r.predicted_peak_bytes,
                               r.predicted_step_ms),
                    "</path>");
    absl::StrAppend(&out, Triangle("mark run-measured", mx, my, 7, palette::kGreen, palette::kGreen),
                    PointTitle(r.label + " (measured)", r.measured_peak_bytes,
                               r.measured_step_ms),
                    "</path>");
    absl::StrAppend(&out, "<text class=\"point-label\" x=\"", Num(mx + 9, 1), "\" y=\"",
                    Num(my + 16, 1), "\">", EscapeHtml(r.label), " (measured)</text>");
  }

  if (!data.plans.empty()) {
    const ReportPlan& chosen = data.plans.front();
    const double x = f.X(chosen.result.peak_bytes / 1e9), y = f.Y(chosen.result.step_ms);
    absl::StrAppend(&out, "<circle class=\"mark chosen\" cx=\"", Num(x, 1), "\" cy=\"",
                    Num(y, 1), "\" r=\"9\">",
                    PointTitle(chosen.name + " (chosen)", chosen.result.peak_bytes,
                               chosen.result.step_ms),
                    "</circle><text class=\"point-label chosen-label\" x=\"",
                    Num(x, 1), "\" y=\"", Num(y + 26, 1), "\" text-anchor=\"middle\">",
                    EscapeHtml(chosen.name), " (chosen)</text>");
  }
  absl::StrAppend(&out, "</svg>");
  return out;
}

}  // namespace sacplan::reports
