// The solver's (kept bytes, recompute time) frontier generators
// (FrontierSaveMasks, planner/search/candidates.h): whole, in a region, in a
// band of times, above a kept floor and at a coarser grain.
#include "search/candidates.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "candidates_test_util.h"

namespace sacplan {
namespace {

using candidates_test::FrontierTestBlock;
using candidates_test::KnapsackCounts;
using candidates_test::kMsTolerance;

bool Covers(const SaveOutcome& a, const SaveOutcome& b) {
  return a.kept_bytes <= b.kept_bytes && a.recompute_ms <= b.recompute_ms + kMsTolerance;
}

// The (kept bytes, recompute time) frontier generators lose nothing: every
// save set is matched or beaten on both by one of theirs.
TEST(FrontierSaveMasksTest, CoverEverySaveSetOnKeptBytesAndRecomputeTime) {
  for (const Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
    for (uint32_t seed = 1; seed <= 25; ++seed) {
      SCOPED_TRACE(std::string(SemanticsName(semantics)) + " seed " + std::to_string(seed));
      const BlockAnalysis block = FrontierTestBlock(seed);
      std::vector<SaveOutcome> frontier;
      for (const SaveMask& mask : FrontierSaveMasks(block, semantics, 1)) {
        ASSERT_EQ(mask.size(), block.ops.size());
        frontier.push_back(DecideSaves(block, mask, semantics));
      }
      std::vector<SaveMask> all = AllSaveMasks(block);
      if (semantics == Semantics::kTorchSac) all = DropUselessSaves(block, std::move(all));
      for (const SaveMask& mask : all) {
        const SaveOutcome outcome = DecideSaves(block, mask, semantics);
        EXPECT_TRUE(std::any_of(frontier.begin(), frontier.end(),
                                [&](const SaveOutcome& f) { return Covers(f, outcome); }))
            << "kept " << outcome.kept_bytes << " recompute " << outcome.recompute_ms;
      }
      // And it is far smaller than the 2^n sets it stands for.
      EXPECT_LT(frontier.size(), all.size());
    }
  }
}

// A region's frontier is the whole frontier's save sets in that region,
// plus plain autograd's, and it is smaller. Checked on torch-sac's
// knapsack, whose counts the test can redo; both programmes keep only
// sets of the whole frontier, fewer for a smaller region.
TEST(FrontierSaveMasksTest, InARegionAreTheWholeFrontiersSetsThere) {
  for (const Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
    size_t whole_total = 0;
    size_t region_total = 0;
    for (uint32_t seed = 1; seed <= 25; ++seed) {
      SCOPED_TRACE(std::string(SemanticsName(semantics)) + " seed " + std::to_string(seed));
      const BlockAnalysis block = FrontierTestBlock(seed);
      const std::vector<SaveMask> whole = FrontierSaveMasks(block, semantics, 1);
      std::vector<int64_t> kept;
      std::vector<double> times;
      for (const SaveMask& mask : whole) {
        if (EveryOpSaved(block, mask)) continue;
        const auto [kept_bytes, ms] = KnapsackCounts(block, mask);
        kept.push_back(kept_bytes);
        times.push_back(ms);
      }
      std::sort(kept.begin(), kept.end());
      std::sort(times.begin(), times.end());
      times.erase(std::unique(times.begin(), times.end()), times.end());
      if (times.size() < 2) continue;
      // Cut both ways inside the frontier; the time between two of its
      // times, clear of rounding. The larger region holds the smaller.
      const size_t at = times.size() / 3;
      const FrontierRegion region{kept[kept.size() * 2 / 3], 0.5 * (times[at] + times[at + 1])};
      const FrontierRegion larger{kept.back(), times[at + 1] + 1};
      const std::vector<SaveMask> small_masks = FrontierSaveMasks(block, semantics, 1, region);
      const std::vector<SaveMask> larger_masks = FrontierSaveMasks(block, semantics, 1, larger);
      const std::set<SaveMask> in_region(small_masks.begin(), small_masks.end());
      const std::set<SaveMask> in_larger(larger_masks.begin(), larger_masks.end());
      const std::set<SaveMask> in_whole(whole.begin(), whole.end());
      EXPECT_TRUE(std::includes(in_whole.begin(), in_whole.end(), in_larger.begin(),
                                in_larger.end()));
      EXPECT_TRUE(std::includes(in_larger.begin(), in_larger.end(), in_region.begin(),
                                in_region.end()));
      if (semantics == Semantics::kTorchSac) {
        for (const SaveMask& mask : whole) {
          const auto [kept_bytes, ms] = KnapsackCounts(block, mask);
          const bool inside =
              EveryOpSaved(block, mask) ||
              (kept_bytes <= region.max_kept_bytes && ms <= region.max_recompute_ms);
          EXPECT_EQ(in_region.contains(mask), inside)
              << "kept " << kept_bytes << " recompute " << ms;
        }
      }
      whole_total += whole.size();
      region_total += in_region.size();
    }
    EXPECT_LT(region_total, whole_total);
    EXPECT_GT(region_total, 0u);
  }
}

// The recompute time a frontier programme counts for a checkpointed set.
double CountedMs(const BlockAnalysis& block, const SaveMask& mask, Semantics semantics) {
  return semantics == Semantics::kTorchSac ? KnapsackCounts(block, mask).second
                                           : DecideSaves(block, mask, semantics).recompute_ms;
}

// A band of recompute times (min_recompute_ms too) holds every set of the
// whole frontier whose time falls in it, and no set outside it; what the
// whole frontier's faster sets would have pruned may come along.
TEST(FrontierSaveMasksTest, InATimeBandHoldTheWholeFrontiersSetsThere) {
  for (const Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
    size_t whole_total = 0;
    size_t band_total = 0;
    for (uint32_t seed = 1; seed <= 25; ++seed) {
      SCOPED_TRACE(std::string(SemanticsName(semantics)) + " seed " + std::to_string(seed));
      const BlockAnalysis block = FrontierTestBlock(seed);
      const std::vector<SaveMask> whole = FrontierSaveMasks(block, semantics, 1);
      std::vector<double> times;
      for (const SaveMask& mask : whole) {
        if (!EveryOpSaved(block, mask)) times.push_back(CountedMs(block, mask, semantics));
      }
      std::sort(times.begin(), times.end());
      times.erase(std::unique(times.begin(), times.end()), times.end());
      if (times.size() < 4) continue;
      // Bounds between two of the frontier's times, clear of rounding.
      const size_t low = times.size() / 4;
      const size_t high = std::min(times.size() * 3 / 4, times.size() - 2);
      FrontierRegion band;
      band.min_recompute_ms = 0.5 * (times[low - 1] + times[low]);
      band.max_recompute_ms = 0.5 * (times[high] + times[high + 1]);
      const std::vector<SaveMask> in_band = FrontierSaveMasks(block, semantics, 1, band);
      const std::set<SaveMask> band_set(in_band.begin(), in_band.end());
      for (const SaveMask& mask : whole) {
        const double ms = CountedMs(block, mask, semantics);
        if (EveryOpSaved(block, mask) || ms < band.min_recompute_ms ||
            ms > band.max_recompute_ms) {
          continue;
        }
        EXPECT_TRUE(band_set.contains(mask)) << "recompute " << ms;
      }
      for (const SaveMask& mask : in_band) {
        if (EveryOpSaved(block, mask)) continue;
        const double ms = CountedMs(block, mask, semantics);
        EXPECT_GE(ms, band.min_recompute_ms - kMsTolerance);
        EXPECT_LE(ms, band.max_recompute_ms + kMsTolerance);
      }
      whole_total += whole.size();
      band_total += band_set.size();
    }
    EXPECT_LT(band_total, whole_total);
    EXPECT_GT(band_total, 0u);
  }
}

// So does a floor on kept bytes (min_kept_bytes). Checked on torch-sac's
// knapsack, whose kept bytes the test can redo (sacplan's programme counts
// what backward needs, which DecideSaves's kept bytes exceed).
TEST(FrontierSaveMasksTest, AboveAKeptFloorHoldTheWholeFrontiersSetsThere) {
  int floored_blocks = 0;
  for (uint32_t seed = 1; seed <= 25; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const BlockAnalysis block = FrontierTestBlock(seed);
    const std::vector<SaveMask> whole = FrontierSaveMasks(block, Semantics::kTorchSac, 1);
    std::vector<int64_t> kept;
    for (const SaveMask& mask : whole) {
      if (!EveryOpSaved(block, mask)) kept.push_back(KnapsackCounts(block, mask).first);
    }
    std::sort(kept.begin(), kept.end());
    kept.erase(std::unique(kept.begin(), kept.end()), kept.end());
    if (kept.size() < 2) continue;
    ++floored_blocks;
    FrontierRegion floor;
    floor.min_kept_bytes = kept[kept.size() / 2];
    const std::vector<SaveMask> above = FrontierSaveMasks(block, Semantics::kTorchSac, 1, floor);
    const std::set<SaveMask> above_set(above.begin(), above.end());
    for (const SaveMask& mask : whole) {
      if (EveryOpSaved(block, mask)) continue;
      EXPECT_EQ(above_set.contains(mask),
                KnapsackCounts(block, mask).first >= floor.min_kept_bytes);
    }
    for (const SaveMask& mask : above) {
      if (!EveryOpSaved(block, mask)) {
        EXPECT_GE(KnapsackCounts(block, mask).first, floor.min_kept_bytes);
      }
    }
  }
  EXPECT_GT(floored_blocks, 0);
}

// At a coarser grain the frontier keeps one label per multiple of the
// quantum at each op, so a save set is matched on time by one that keeps at
// most a quantum more per op decided; and it is smaller.
TEST(FrontierSaveMasksTest, AtAQuantumCoverEverySaveSetWithinAQuantumPerOp) {
  constexpr int64_t kQuantum = 24;
  for (const Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
    size_t exact_total = 0;
    size_t coarse_total = 0;
    for (uint32_t seed = 1; seed <= 25; ++seed) {
      SCOPED_TRACE(std::string(SemanticsName(semantics)) + " seed " + std::to_string(seed));
      const BlockAnalysis block = FrontierTestBlock(seed);
      const int64_t slack = kQuantum * block.op_count();
      std::vector<SaveOutcome> coarse;
      for (const SaveMask& mask : FrontierSaveMasks(block, semantics, kQuantum)) {
        coarse.push_back(DecideSaves(block, mask, semantics));
      }
      exact_total += FrontierSaveMasks(block, semantics, 1).size();
      coarse_total += coarse.size();
      std::vector<SaveMask> all = AllSaveMasks(block);
      if (semantics == Semantics::kTorchSac) all = DropUselessSaves(block, std::move(all));
      for (const SaveMask& mask : all) {
        const SaveOutcome outcome = DecideSaves(block, mask, semantics);
        EXPECT_TRUE(std::any_of(coarse.begin(), coarse.end(), [&](const SaveOutcome& f) {
          return f.kept_bytes <= outcome.kept_bytes + slack &&
                 f.recompute_ms <= outcome.recompute_ms + 1e-9;
        })) << "kept " << outcome.kept_bytes << " recompute " << outcome.recompute_ms;
      }
    }
    EXPECT_LT(coarse_total, exact_total) << SemanticsName(semantics);
  }
}

}  // namespace
}  // namespace sacplan
