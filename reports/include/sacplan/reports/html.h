// Small pieces for writing HTML and SVG by hand: escaping, numbers, axis
// ticks and the colour palette every chart shares.
#ifndef SACPLAN_REPORTS_HTML_H_
#define SACPLAN_REPORTS_HTML_H_

#include <string>
#include <string_view>
#include <vector>

#include "sacplan/planner/memory/memory_tracker.h"

namespace sacplan::reports {

// Escapes &, <, >, " and ' so that `text` is safe both as element content
// and inside a double- or single-quoted attribute.
std::string EscapeHtml(std::string_view text);

// Fixed-point number with `decimals` digits ("12.35"); NaN and infinities
// come out as "0" so that markup never holds them.
std::string Num(double value, int decimals);

// About `target` round tick values covering [lo, hi] (steps of 1, 2 or 5
// times a power of ten), ascending, all within [lo, hi]. Empty when hi <= lo.
std::vector<double> NiceTicks(double lo, double hi, int target);

// Okabe-Ito colours (colour-blind safe), as "#rrggbb".
namespace palette {
inline constexpr const char* kOrange = "#E69F00";
inline constexpr const char* kSkyBlue = "#56B4E9";
inline constexpr const char* kGreen = "#009E73";
inline constexpr const char* kYellow = "#F0E442";
inline constexpr const char* kBlue = "#0072B2";
inline constexpr const char* kVermillion = "#D55E00";
inline constexpr const char* kPurple = "#CC79A7";
inline constexpr const char* kBlack = "#000000";
inline constexpr const char* kGrey = "#999999";
inline constexpr const char* kLightGrey = "#DDDDDD";
}  // namespace palette

// The timeline's colour and legend label for a memory category.
const char* CategoryColor(MemoryCategory category);
const char* CategoryLabel(MemoryCategory category);

}  // namespace sacplan::reports

#endif  // SACPLAN_REPORTS_HTML_H_
