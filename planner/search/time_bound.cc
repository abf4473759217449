#include "search/time_bound.h"

#include <cmath>
#include <limits>

namespace sacplan {

TimeBound::TimeBound(const std::vector<const std::vector<HullPoint>*>& hulls,
                     int64_t capacity_bytes, double incumbent_ms)
    : capacity_bytes_(capacity_bytes),
      // The slack keeps the incumbent's own path, whose bound is its
      // time, from rounding away.
      limit_ms_(incumbent_ms + 1e-9 * std::max(1.0, std::abs(incumbent_ms))) {
  const int block_count = static_cast<int>(hulls.size());
  auto slope = [&](double at) {
    double kept = 0;
    for (const std::vector<HullPoint>* block_hull : hulls) {
      const std::vector<HullPoint>& hull = *block_hull;
      double least = std::numeric_limits<double>::infinity();
      int64_t least_kept = 0;
      for (const HullPoint& point : hull) {
        const double value = point.ms + at * static_cast<double>(point.kept_bytes);
        if (value < least) {
          least = value;
          least_kept = point.kept_bytes;
        }
      }
      kept += static_cast<double>(least_kept);
    }
    return kept - static_cast<double>(capacity_bytes);
  };
  if (slope(0) > 0) {
    double low = 0;
    double high = 1e-12;
    while (slope(high) > 0 && high < 1e12) high *= 4;
    for (int i = 0; i < 32; ++i) {
      const double mid = 0.5 * (low + high);
      (slope(mid) > 0 ? low : high) = mid;
    }
    lambda_ = high;
  }
  relaxed_ms_.resize(block_count);
  relaxed_suffix_ms_.assign(block_count + 1, 0);
  fastest_suffix_ms_.assign(block_count + 1, 0);
  for (int b = block_count - 1; b >= 0; --b) {
    double relaxed = std::numeric_limits<double>::infinity();
    for (const HullPoint& point : *hulls[b]) {
      relaxed = std::min(relaxed, Relaxed(point.ms, point.kept_bytes));
    }
    // The hull ends at the fastest candidate.
    const double fastest = hulls[b]->empty() ? std::numeric_limits<double>::infinity()
                                             : hulls[b]->back().ms;
    relaxed_ms_[b] = relaxed;
    relaxed_suffix_ms_[b] = relaxed_suffix_ms_[b + 1] + relaxed;
    fastest_suffix_ms_[b] = fastest_suffix_ms_[b + 1] + fastest;
  }
}

std::vector<TimeBound::HullPoint> TimeBound::LowerLeftHull(
    const std::vector<BlockCandidate>& candidates) {
  std::vector<HullPoint> points;
  points.reserve(candidates.size());
  for (const BlockCandidate& candidate : candidates) {
    points.push_back({candidate.cost.kept_bytes, CandidateMs(candidate.cost)});
  }
  std::sort(points.begin(), points.end(), [](const HullPoint& a, const HullPoint& b) {
    return a.kept_bytes != b.kept_bytes ? a.kept_bytes < b.kept_bytes : a.ms < b.ms;
  });
  std::vector<HullPoint> hull;
  for (const HullPoint& point : points) {
    if (!hull.empty() && point.ms >= hull.back().ms) continue;  // slower, keeps as much
    while (hull.size() >= 2) {
      const HullPoint& a = hull[hull.size() - 2];
      const HullPoint& b = hull.back();
      // b on or above the segment from a to point: a mix of them beats it.
      const double cross =
          static_cast<double>(b.kept_bytes - a.kept_bytes) * (point.ms - a.ms) -
          (b.ms - a.ms) * static_cast<double>(point.kept_bytes - a.kept_bytes);
      if (cross > 0) break;
      hull.pop_back();
    }
    hull.push_back(point);
  }
  return hull;
}

double TimeBound::HullMs(const std::vector<HullPoint>& hull, int64_t kept_bytes) {
  if (hull.empty() || kept_bytes < hull.front().kept_bytes) {
    return std::numeric_limits<double>::infinity();
  }
  for (size_t i = 0; i + 1 < hull.size(); ++i) {
    const HullPoint& low = hull[i];
    const HullPoint& high = hull[i + 1];
    if (kept_bytes < high.kept_bytes) {
      const double share = static_cast<double>(kept_bytes - low.kept_bytes) /
                           static_cast<double>(high.kept_bytes - low.kept_bytes);
      return low.ms + share * (high.ms - low.ms);
    }
  }
  return hull.back().ms;
}

double TimeBound::RelaxedAllowance(int b, double value_ms, int64_t prefix_bytes) const {
  const double headroom_ms = lambda_ * static_cast<double>(capacity_bytes_ - prefix_bytes);
  const double allowance = limit_ms_ - value_ms - relaxed_suffix_ms_[b] + headroom_ms;
  const double scale = std::abs(limit_ms_) + std::abs(value_ms) +
                       std::abs(relaxed_suffix_ms_[b]) + std::abs(headroom_ms);
  return allowance + 1e-9 * std::max(1.0, scale);
}

}  // namespace sacplan
