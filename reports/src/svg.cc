#include "svg.h"

#include "absl/strings/str_cat.h"
#include "sacplan/reports/html.h"

namespace sacplan::reports {

double PlotFrame::X(double x) const {
  if (x_hi <= x_lo) return left;
  return left + (x - x_lo) / (x_hi - x_lo) * width;
}

double PlotFrame::Y(double y) const {
  if (y_hi <= y_lo) return bottom();
  return bottom() - (y - y_lo) / (y_hi - y_lo) * height;
}

std::string Axes(const PlotFrame& f, const std::string& x_title,
                 int x_decimals, const std::string& y_title, int y_decimals) {
  std::string out = "<g class=\"axes\">";
  for (double t : NiceTicks(f.x_lo, f.x_hi, 10)) {
    const std::string x = Num(f.X(t), 1);
    absl::StrAppend(&out, "<line class=\"grid\" x1=\"", x, "\" x2=\"", x,
                    "\" y1=\"", Num(f.top, 1), "\" y2=\"", Num(f.bottom(), 1),
                    "\"/><text class=\"tick\" x=\"", x, "\" y=\"",
                    Num(f.bottom() + 16, 1), "\" text-anchor=\"middle\">",
                    Num(t, x_decimals), "</text>");
  }
  for (double t : NiceTicks(f.y_lo, f.y_hi, 6)) {
    const std::string y = Num(f.Y(t), 1);
    absl::StrAppend(&out, "<line class=\"grid\" x1=\"", Num(f.left, 1),
                    "\" x2=\"", Num(f.right(), 1), "\" y1=\"", y, "\" y2=\"",
                    y, "\"/><text class=\"tick\" x=\"", Num(f.left - 6, 1),
                    "\" y=\"", y, "\" dy=\"4\" text-anchor=\"end\">",
                    Num(t, y_decimals), "</text>");
  }
  absl::StrAppend(&out, "<rect class=\"frame\" x=\"", Num(f.left, 1), "\" y=\"",
                  Num(f.top, 1), "\" width=\"", Num(f.width, 1),
                  "\" height=\"", Num(f.height, 1), "\"/>");
  absl::StrAppend(&out, "<text class=\"axis-label\" x=\"",
                  Num(f.left + f.width / 2, 1), "\" y=\"",
                  Num(f.bottom() + 36, 1), "\" text-anchor=\"middle\">",
                  EscapeHtml(x_title), "</text>");
  const std::string cy = Num(f.top + f.height / 2, 1);
  absl::StrAppend(&out, "<text class=\"axis-label\" x=\"", Num(f.left - 50, 1),
                  "\" y=\"", cy, "\" text-anchor=\"middle\" transform=\"rotate(-90 ",
                  Num(f.left - 50, 1), " ", cy, ")\">", EscapeHtml(y_title),
                  "</text></g>");
  return out;
}

std::string SvgOpen(const std::string& id, const std::string& kind, int width,
                    int height, const std::string& aria_label) {
  return absl::StrCat("<svg class=\"chart\" id=\"", EscapeHtml(id),
                      "\" data-chart=\"", EscapeHtml(kind), "\" viewBox=\"0 0 ",
                      width, " ", height,
                      "\" xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" "
                      "aria-label=\"",
                      EscapeHtml(aria_label), "\">");
}

std::string LegendItem(double& x, double y, const std::string& shape,
                       const std::string& color, const std::string& label) {
  std::string out = "<g class=\"legend-item\">";
  const std::string c = EscapeHtml(color);
  if (shape == "rect" || shape == "square") {
    absl::StrAppend(&out, "<rect x=\"", Num(x, 1), "\" y=\"", Num(y - 9, 1),
                    "\" width=\"12\" height=\"12\" fill=\"", c, "\"/>");
  } else if (shape == "circle") {
    absl::StrAppend(&out, "<circle cx=\"", Num(x + 6, 1), "\" cy=\"",
                    Num(y - 3, 1), "\" r=\"5\" fill=\"", c, "\"/>");
  } else if (shape == "ring") {
    absl::StrAppend(&out, "<circle cx=\"", Num(x + 6, 1), "\" cy=\"",
                    Num(y - 3, 1), "\" r=\"6\" fill=\"none\" stroke=\"", c,
                    "\" stroke-width=\"3\"/>");
  } else if (shape == "diamond") {
    absl::StrAppend(&out, "<path d=\"M", Num(x + 6, 1), " ", Num(y - 10, 1),
                    "l6 7l-6 7l-6 -7z\" fill=\"", c, "\"/>");
  } else if (shape == "triangle") {
    absl::StrAppend(&out, "<path d=\"M", Num(x + 6, 1), " ", Num(y - 10, 1),
                    "l6 11h-12z\" fill=\"", c, "\"/>");
  } else {  // dash
    absl::StrAppend(&out, "<line x1=\"", Num(x, 1), "\" x2=\"", Num(x + 14, 1),
                    "\" y1=\"", Num(y - 3, 1), "\" y2=\"", Num(y - 3, 1),
                    "\" stroke=\"", c, "\" stroke-width=\"2\" stroke-dasharray=\"5 3\"/>");
  }
  absl::StrAppend(&out, "<text x=\"", Num(x + 18, 1), "\" y=\"", Num(y, 1),
                  "\">", EscapeHtml(label), "</text></g>");
  x += 30 + 7.4 * static_cast<double>(label.size());
  return out;
}

}  // namespace sacplan::reports
