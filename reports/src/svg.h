// Internal: a chart's plotting area, its data-to-pixel mapping and axes.
#ifndef SACPLAN_REPORTS_SRC_SVG_H_
#define SACPLAN_REPORTS_SRC_SVG_H_

#include <string>
#include <vector>

namespace sacplan::reports {

// A plot area of width x height pixels at (left, top) in the SVG, showing
// data x in [x_lo, x_hi] and y in [y_lo, y_hi] (y grows upwards).
struct PlotFrame {
  double left = 70, top = 40, width = 1100, height = 300;
  double x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;

  double X(double x) const;
  double Y(double y) const;
  double right() const { return left + width; }
  double bottom() const { return top + height; }
};

// Grid lines, tick labels and the two axis titles (class "axis-label"),
// e.g. "step time (ms)" and "peak memory (GB)".
std::string Axes(const PlotFrame& frame, const std::string& x_title,
                 int x_decimals, const std::string& y_title, int y_decimals);

// "<svg class="chart" ...>" opening tag with a viewBox of width x height.
std::string SvgOpen(const std::string& id, const std::string& kind,
                    int width, int height, const std::string& aria_label);

// One legend entry: a swatch (shape "rect", "circle", "square", "diamond",
// "ring", "triangle", "dash") and its label, at (x, y); returns the markup
// and advances x past it.
std::string LegendItem(double& x, double y, const std::string& shape,
                       const std::string& color, const std::string& label);

}  // namespace sacplan::reports

#endif  // SACPLAN_REPORTS_SRC_SVG_H_
