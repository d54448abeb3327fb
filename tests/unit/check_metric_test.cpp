// The --check metric (reference.hpp): the Frobenius relative error per parameter, and the
// AdamW eps-regime excuse, on values worked out by hand.

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "dmuon/engine/verify/reference.hpp"
#include "dmuon/model/module_tree.hpp"

namespace {

using namespace dmuon;

// One Linear "a" (weight 2x2, no bias) and one "b" (weight 1x4).
model::ModuleTree two_linears() {
  model::ModuleTree tree("M");
  tree.add_linear(0, "a", 2, 2);
  tree.add_linear(0, "b", 4, 1);
  tree.finalize();
  return tree;
}

TEST(CheckMetric, FrobeniusRelativeErrorPerParameterAndTheWorst) {
  const auto tree = two_linears();
  // a: reference (3, 0, 0, 4), ‖·‖ = 5, difference (0, 0, 0, 0.05) -> 0.01.
  // b: reference (1, 1, 1, 1), ‖·‖ = 2, difference (0.01, 0, 0, 0) -> 0.005.
  const std::vector<std::vector<float>> ref = {{3, 0, 0, 4}, {1, 1, 1, 1}};
  const std::vector<std::vector<float>> run = {{3, 0, 0, 4.05f}, {1.01f, 1, 1, 1}};
  std::string worst;
  EXPECT_NEAR(engine::max_relative_error(tree, run, ref, &worst), 0.01, 1e-6);
  EXPECT_EQ(worst, tree.parameter(tree.parameter_order()[0]).name);
}

TEST(CheckMetric, AnEpsRegimeElementIsExcusedWithinItsBoundOnly) {
  const auto tree = two_linears();
  const std::vector<std::vector<float>> ref = {{3, 0, 0, 4}, {1, 1, 1, 1}};
  engine::AdamwEpsRegime regime;
  regime.bound_per_step = 0.002;     // 2 x lr 1e-3
  regime.elements = {{{3, 1}}, {}};  // a[3] cancelled at one step
  std::int64_t excused = 0;
  // a[3] moved 0.0015 <= 0.002: excused, a's error is 0; b's 0.01 / 2 = 0.005 remains.
  {
    const std::vector<std::vector<float>> run = {{3, 0, 0, 4.0015f}, {1.01f, 1, 1, 1}};
    EXPECT_NEAR(engine::max_relative_error(tree, run, ref, nullptr, &regime, &excused), 0.005,
                1e-6);
    EXPECT_EQ(excused, 1);
  }
  // Beyond the bound (0.003 > 0.002) it counts as any difference: 0.003 / 5 = 6e-4.
  {
    excused = 0;
    const std::vector<std::vector<float>> run = {{3, 0, 0, 4.003f}, {1, 1, 1, 1}};
    EXPECT_NEAR(engine::max_relative_error(tree, run, ref, nullptr, &regime, &excused), 6e-4, 1e-6);
    EXPECT_EQ(excused, 0);
  }
  // Two flagged steps double the bound: 0.003 <= 2 x 0.002.
  {
    excused = 0;
    regime.elements = {{{3, 2}}, {}};
    const std::vector<std::vector<float>> run = {{3, 0, 0, 4.003f}, {1, 1, 1, 1}};
    EXPECT_NEAR(engine::max_relative_error(tree, run, ref, nullptr, &regime, &excused), 0.0, 1e-9);
    EXPECT_EQ(excused, 1);
  }
  // An unflagged element of the same size is never excused: a[0] off by 0.0015 -> 3e-4.
  {
    excused = 0;
    regime.elements = {{{3, 1}}, {}};
    const std::vector<std::vector<float>> run = {{3.0015f, 0, 0, 4}, {1, 1, 1, 1}};
    EXPECT_NEAR(engine::max_relative_error(tree, run, ref, nullptr, &regime, &excused), 3e-4, 1e-6);
    EXPECT_EQ(excused, 0);
  }
  // A flagged element that differs by rounding only is left out without being counted.
  {
    excused = 0;
    const std::vector<std::vector<float>> run = {{3, 0, 0, 4.000001f}, {1, 1, 1, 1}};
    EXPECT_NEAR(engine::max_relative_error(tree, run, ref, nullptr, &regime, &excused), 0.0, 1e-9);
    EXPECT_EQ(excused, 0);
  }
}

}  // namespace
