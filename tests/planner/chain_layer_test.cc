#include "search/chain_layer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

namespace sacplan {
namespace {

constexpr int64_t kQuantumBytes = 100;
constexpr int64_t kMaxPrefixBytes = 2000;

// States that tie often: few kept bytes and values, the values falling as
// kept bytes rise (as a chain's do, so that most buckets are on the
// frontier), several parents and ranks, and some kept bytes past the
// layer's end.
std::vector<ChainState> TyingStates(uint32_t seed, int count) {
  std::mt19937 rng(seed);
  std::vector<ChainState> states;
  for (int i = 0; i < count; ++i) {
    ChainState s;
    const int step = static_cast<int>(rng() % 60);
    s.prefix_kept_bytes = 37 * static_cast<int64_t>(step);
    s.value = static_cast<double>((60 - step) / 3 + static_cast<int>(rng() % 2));
    s.parent = static_cast<int>(rng() % 7);
    s.rank = static_cast<int>(rng() % 4);
    // A layer's candidate has one rank: the index, scrambled.
    s.candidate = (s.rank * 5 + 3) % 4;
    states.push_back(s);
  }
  return states;
}

void ExpectSameStates(const std::vector<ChainState>& a, const std::vector<ChainState>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].prefix_kept_bytes, b[i].prefix_kept_bytes) << i;
    EXPECT_EQ(a[i].value, b[i].value) << i;
    EXPECT_EQ(a[i].parent, b[i].parent) << i;
    EXPECT_EQ(a[i].rank, b[i].rank) << i;
    EXPECT_EQ(a[i].candidate, b[i].candidate) << i;
  }
}

std::vector<ChainState> OfferedInOrder(const std::vector<ChainState>& states) {
  BucketLayer layer(kQuantumBytes, kMaxPrefixBytes, /*keep_lean=*/false);
  for (const ChainState& s : states) layer.Offer(s);
  return layer.Frontier();
}

TEST(BucketLayerTest, FrontierRisesInKeptBytesAndFallsInValue) {
  const std::vector<ChainState> frontier = OfferedInOrder(TyingStates(1, 500));
  ASSERT_GT(frontier.size(), 10u);
  for (size_t i = 1; i < frontier.size(); ++i) {
    EXPECT_LT(frontier[i - 1].prefix_kept_bytes / kQuantumBytes,
              frontier[i].prefix_kept_bytes / kQuantumBytes);
    EXPECT_GT(frontier[i - 1].value, frontier[i].value);
  }
  for (const ChainState& s : frontier) EXPECT_LE(s.prefix_kept_bytes, kMaxPrefixBytes + kQuantumBytes - 1);
}

// Each bucket keeps the least value, then the fewest kept bytes, then the
// state OfferedBefore the others: whatever order the states arrive in, and
// however they are shared between two layers absorbed into one.
TEST(BucketLayerTest, KeptStatesDoNotDependOnTheOrderOfOffers) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(seed);
    std::vector<ChainState> states = TyingStates(seed, 400);
    std::stable_sort(states.begin(), states.end(), [](const ChainState& a, const ChainState& b) {
      return OfferedBefore(a, b);
    });
    const std::vector<ChainState> in_order = OfferedInOrder(states);

    std::mt19937 rng(seed);
    std::vector<ChainState> shuffled = states;
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    ExpectSameStates(in_order, OfferedInOrder(shuffled));

    BucketLayer mine(kQuantumBytes, kMaxPrefixBytes, /*keep_lean=*/false);
    BucketLayer theirs(kQuantumBytes, kMaxPrefixBytes, /*keep_lean=*/false);
    for (const ChainState& s : shuffled) (rng() % 2 == 0 ? mine : theirs).Offer(s);
    mine.Absorb(theirs);
    ExpectSameStates(in_order, mine.Frontier());
  }
}

TEST(BucketLayerTest, ClearEmptiesEveryBucket) {
  BucketLayer layer(kQuantumBytes, kMaxPrefixBytes, /*keep_lean=*/false);
  for (const ChainState& s : TyingStates(3, 50)) layer.Offer(s);
  ASSERT_FALSE(layer.Frontier().empty());
  layer.Clear();
  EXPECT_TRUE(layer.Frontier().empty());
}

// Two windowed states in one bucket: the faster holds 300 bytes in the next
// block, the slower 100. Both are kept with keep_lean (the faster may find
// no candidate there that fits), only the faster without; a plain state
// as fast as either beats both.
TEST(BucketLayerTest, KeepLeanKeepsTheWindowedStateHoldingLeast) {
  ChainState fast{.prefix_kept_bytes = 10, .value = 1.0, .parent = 0, .candidate = 0,
                  .rank = 0, .spill_bytes = 0, .lead_bytes = 300};
  ChainState lean = fast;
  lean.value = 2.0;
  lean.candidate = 1;
  lean.lead_bytes = 100;
  for (const bool keep_lean : {false, true}) {
    BucketLayer layer(kQuantumBytes, kMaxPrefixBytes, keep_lean);
    layer.Offer(lean);
    layer.Offer(fast);
    const std::vector<ChainState> kept = layer.Frontier();
    ASSERT_EQ(kept.size(), keep_lean ? 2u : 1u) << keep_lean;
    EXPECT_EQ(kept[0].candidate, 0);
    if (keep_lean) {
      EXPECT_EQ(kept[1].candidate, 1);
    }
    ChainState plain = fast;
    plain.lead_bytes = 0;
    plain.candidate = 2;
    layer.Offer(plain);
    ASSERT_EQ(layer.Frontier().size(), 1u);
    EXPECT_EQ(layer.Frontier()[0].candidate, 2);
  }
}

// Run over layers of many sizes, one helper for all of them, keeps what
// one thread offering every state would. The caller's first chunk waits
// until the helper has offered, so that both offer: it cannot wait forever
// while Run shares chunks out, since a layer of two states or more has two
// chunks or more and the helper takes the next one the caller leaves (a
// split that never gave the helper work would hang here until ctest's
// timeout). No clock: the wait is on the helper's first offer itself.
TEST(LayerSplitTest, KeepsWhatOneThreadKeeps) {
  LayerSplit split;
  BucketLayer theirs(kQuantumBytes, kMaxPrefixBytes, /*keep_lean=*/false);
  const std::thread::id caller = std::this_thread::get_id();
  for (const int count : {1, 2, 7, 64, 500, 3000}) {
    for (uint32_t seed = 1; seed <= 3; ++seed) {
      SCOPED_TRACE(::testing::Message() << count << " states, seed " << seed);
      // Each state offers a few of the tying states, as a chain state
      // offers its candidates.
      const std::vector<ChainState> pool = TyingStates(seed, 4 * count);
      std::atomic<bool> helper_offered{false};
      std::atomic<bool> waiting{count > 1};
      const LayerSplit::OfferStates offer = [&](int from, int to, BucketLayer& into) {
        if (std::this_thread::get_id() != caller) {
          helper_offered = true;
          helper_offered.notify_one();
        } else if (waiting.exchange(false)) {
          helper_offered.wait(false);
        }
        for (int i = from; i < to; ++i) {
          for (int j = 0; j < 4; ++j) into.Offer(pool[4 * i + j]);
        }
      };
      BucketLayer alone(kQuantumBytes, kMaxPrefixBytes, /*keep_lean=*/false);
      for (int i = 0; i < 4 * count; ++i) alone.Offer(pool[i]);
      BucketLayer mine(kQuantumBytes, kMaxPrefixBytes, /*keep_lean=*/false);
      split.Run(count, mine, theirs, offer);
      ExpectSameStates(alone.Frontier(), mine.Frontier());
    }
  }
}

}  // namespace
}  // namespace sacplan
