#include "sacplan/reports/html.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace sacplan::reports {

std::string EscapeHtml(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string Num(double value, int decimals) {
  if (!std::isfinite(value)) return "0";
  std::string text = absl::StrFormat("%.*f", decimals, value);
  if (text == "-0" || text.find_first_not_of("-0.") == std::string::npos) {
    return decimals == 0 ? "0" : absl::StrFormat("%.*f", decimals, 0.0);
  }
  return text;
}

std::vector<double> NiceTicks(double lo, double hi, int target) {
  std::vector<double> ticks;
  if (!(hi > lo) || target < 1) return ticks;
  const double raw = (hi - lo) / target;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double factor : {1.0, 2.0, 5.0, 10.0}) {
    step = factor * magnitude;
    if (step >= raw) break;
  }
  const double first = std::ceil(lo / step - 1e-9) * step;
  for (double t = first; t <= hi + step * 1e-9; t += step) {
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  }
  return ticks;
}

const char* CategoryColor(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::kParamsAndOptimizer: return palette::kBlue;
    case MemoryCategory::kParamGrads: return palette::kSkyBlue;
    case MemoryCategory::kSharedInputs: return palette::kPurple;
    case MemoryCategory::kKept: return palette::kGreen;
    case MemoryCategory::kForwardLive: return palette::kYellow;
    case MemoryCategory::kRecomputed: return palette::kOrange;
    case MemoryCategory::kActivationGrads: return palette::kVermillion;
    case MemoryCategory::kWorkspace: return palette::kBlack;
    case MemoryCategory::kFsdpBuffers: return palette::kGrey;
  }
  return palette::kGrey;
}

const char* CategoryLabel(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::kParamsAndOptimizer: return "parameters + optimizer state";
    case MemoryCategory::kParamGrads: return "parameter gradients";
    case MemoryCategory::kSharedInputs: return "shared inputs";
    case MemoryCategory::kKept: return "kept activations";
    case MemoryCategory::kForwardLive: return "forward working set";
    case MemoryCategory::kRecomputed: return "recompute working set";
    case MemoryCategory::kActivationGrads: return "activation gradients";
    case MemoryCategory::kWorkspace: return "workspace";
    case MemoryCategory::kFsdpBuffers: return "FSDP buffers";
  }
  return "other";
}

}  // namespace sacplan::reports
