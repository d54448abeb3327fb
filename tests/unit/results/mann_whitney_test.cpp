// The Mann-Whitney U test against values computed by hand (the permutation distribution of U
// for small samples, the normal approximation with ties by the textbook formula).

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "dmuon/results/mann_whitney.hpp"

namespace {

using dmuon::results::mann_whitney_u;
using dmuon::results::min_one_sided_p;

TEST(MannWhitney, CompleteSeparationThreeVersusThree) {
  // All 3 B values above all 3 A values: U_B = 9, and only 1 of the C(6,3) = 20 equally likely
  // arrangements is that extreme: p = 1/20.
  const auto t = mann_whitney_u({1, 2, 3}, {4, 5, 6});
  EXPECT_TRUE(t.exact);
  EXPECT_DOUBLE_EQ(t.u_b, 9);
  EXPECT_NEAR(t.p_greater, 0.05, 1e-12);
  EXPECT_NEAR(t.p_less, 1.0, 1e-12);
  EXPECT_NEAR(t.min_p, 0.05, 1e-12);
}

TEST(MannWhitney, InterleavedSamples) {
  // A = {1,3,5}, B = {2,4,6}: B beats 1 + 2 + 3 = 6 of the 9 pairs. The counts of U = 0..9 over
  // the 20 arrangements are 1,1,2,3,3,3,3,2,1,1 (the partitions of u into at most 3 parts of
  // size at most 3), so P(U >= 6) = (3+2+1+1)/20 = 0.35 and P(U <= 6) = (1+1+2+3+3+3+3)/20 =
  // 0.8.
  const auto t = mann_whitney_u({1, 3, 5}, {2, 4, 6});
  EXPECT_DOUBLE_EQ(t.u_b, 6);
  EXPECT_NEAR(t.p_greater, 0.35, 1e-12);
  EXPECT_NEAR(t.p_less, 0.8, 1e-12);
}

TEST(MannWhitney, FiveVersusFiveSeparated) {
  // 1 / C(10,5) = 1/252.
  const auto t = mann_whitney_u({1, 2, 3, 4, 5}, {6, 7, 8, 9, 10});
  EXPECT_NEAR(t.p_greater, 1.0 / 252, 1e-12);
  EXPECT_NEAR(min_one_sided_p(5, 5), 1.0 / 252, 1e-15);
  // The other direction: A larger than B.
  const auto u = mann_whitney_u({6, 7, 8, 9, 10}, {1, 2, 3, 4, 5});
  EXPECT_DOUBLE_EQ(u.u_b, 0);
  EXPECT_NEAR(u.p_less, 1.0 / 252, 1e-12);
  EXPECT_NEAR(u.p_greater, 1.0, 1e-12);
}

TEST(MannWhitney, UnequalSizes) {
  // A = {1,2}, B = {3,4,5}: complete separation, 1/C(5,2) = 1/10; B = {0,3,4}: U_B = 4 of 6
  // pairs; arrangements of 2 A among 5 with U = #pairs b > a: counts of U = 0..6 are
  // 1,1,2,2,2,1,1 (sum 10), so P(U >= 4) = 4/10.
  EXPECT_NEAR(mann_whitney_u({1, 2}, {3, 4, 5}).p_greater, 0.1, 1e-12);
  const auto t = mann_whitney_u({1, 2}, {0, 3, 4});
  EXPECT_DOUBLE_EQ(t.u_b, 4);
  EXPECT_NEAR(t.p_greater, 0.4, 1e-12);
}

TEST(MannWhitney, TiesUseTheNormalApproximation) {
  // A = {1,2,2,3}, B = {2,3,3,4,5}. Mid-ranks: 1 -> 1; the three 2s share 3; the three 3s
  // share 6; 4 -> 8; 5 -> 9. B's rank sum 3+6+6+8+9 = 32, U_B = 32 - 5*6/2 = 17. Mean 10;
  // variance 4*5/12 * (10 - (24+24)/(9*8)) = 140/9; z = (17 - 10 - 0.5)/sqrt(140/9) = 1.64804;
  // p = 1 - Phi(z) = 0.049671.
  const auto t = mann_whitney_u({1, 2, 2, 3}, {2, 3, 3, 4, 5});
  EXPECT_FALSE(t.exact);
  EXPECT_DOUBLE_EQ(t.u_b, 17);
  EXPECT_NEAR(t.p_greater, 0.049671, 1e-5);
}

TEST(MannWhitney, EqualSamplesShowNoEvidence) {
  const auto t = mann_whitney_u({2, 2, 2}, {2, 2, 2});
  EXPECT_DOUBLE_EQ(t.u_b, 4.5);
  EXPECT_DOUBLE_EQ(t.p_greater, 1);
  EXPECT_DOUBLE_EQ(t.p_less, 1);
}

TEST(MannWhitney, LargeExactSamplesStayAccurateInTheTail) {
  // 60 vs 60, B shifted by 30.5: U_B = 3165; P(U >= 3165) = 4.401376602e-15 (exact integer
  // count over C(120,60), computed independently with Python's big integers).
  std::vector<double> a, b;
  for (int i = 0; i < 60; ++i) {
    a.push_back(i);
    b.push_back(i + 30.5);
  }
  const auto t = mann_whitney_u(a, b);
  EXPECT_TRUE(t.exact);
  EXPECT_DOUBLE_EQ(t.u_b, 3165);
  EXPECT_NEAR(t.p_greater / 4.401376602275475e-15, 1.0, 1e-6);
}

}  // namespace
