// The bench table's step column: what a spread of step times prints as, and that it keeps to
// its width (the table's 160 columns) with fewer digits before less information.

#include <gtest/gtest.h>

#include "bench/bench_output.hpp"

namespace {

using dmuon::apps::bench::Spread;
using dmuon::apps::bench::spread_text;

Spread spread(double min, double median, double max, std::size_t n = 4) {
  return Spread{min, median, max, n};
}

TEST(BenchTable, StepColumnKeepsToItsWidth) {
  EXPECT_EQ(spread_text(Spread{}, 18), "-");
  EXPECT_EQ(spread_text(spread(5, 5, 5, 1), 18), "5.00");
  EXPECT_EQ(spread_text(spread(172.4, 217.04, 277.6), 18), "217.0 (172-278)");
  // The main job on a loaded machine: 18 characters, as they are.
  EXPECT_EQ(spread_text(spread(1061, 1300.9, 1652), 18), "1300.9 (1061-1652)");
  // One character over: the median's decimal goes first.
  EXPECT_EQ(spread_text(spread(1061, 1300.9, 1652), 17), "1301 (1061-1652)");
  // Still over: the range's upper side as a share of the median (1.25x: +25 %).
  EXPECT_EQ(spread_text(spread(10610, 13010, 16262.5), 18), "13010 (max +25%)");
}

}  // namespace
