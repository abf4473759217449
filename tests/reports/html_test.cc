#include "sacplan/reports/html.h"

#include <gtest/gtest.h>

namespace sacplan::reports {
namespace {

TEST(HtmlTest, EscapesEverythingThatCouldBreakOut) {
  EXPECT_EQ(EscapeHtml("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
  EXPECT_EQ(EscapeHtml("plain ffn.0"), "plain ffn.0");
}

TEST(HtmlTest, NumbersNeverHoldNanOrNegativeZero) {
  EXPECT_EQ(Num(12.345, 2), "12.35");
  EXPECT_EQ(Num(-0.001, 1), "0.0");
  EXPECT_EQ(Num(0.0 / 0.0, 1), "0");
  EXPECT_EQ(Num(3, 0), "3");
}

TEST(HtmlTest, TicksAreRoundAndInside) {
  EXPECT_EQ(NiceTicks(0, 10, 5), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(NiceTicks(0, 43068, 10).front(), 0);
  EXPECT_EQ(NiceTicks(0, 43068, 10).back(), 40000);
  EXPECT_EQ(NiceTicks(7.3, 9.9, 6), (std::vector<double>{7.5, 8, 8.5, 9, 9.5}));
  EXPECT_TRUE(NiceTicks(1, 1, 5).empty());
}

}  // namespace
}  // namespace sacplan::reports
