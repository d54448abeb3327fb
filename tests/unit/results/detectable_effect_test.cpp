// The minimum detectable effect against values worked out by hand: the critical value of U
// from the permutation distribution (partitions of u, as in mann_whitney_test), the ordered
// differences a_i - b'_j of tiny samples, and the shifted samples the test just flags.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "dmuon/results/detectable_effect.hpp"
#include "dmuon/results/mann_whitney.hpp"

namespace {

using namespace dmuon::results;

TEST(CriticalU, FourVersusFour) {
  // C(8,4) = 70 arrangements; U_B = 16, 15, 14 in 1, 1, 2 of them: P(U >= 15) = 2/70 = 0.029
  // < 0.05 but P(U >= 14) = 4/70 = 0.057. At alpha 0.02 only U = 16 (1/70 = 0.014) is enough.
  EXPECT_EQ(critical_u(4, 4, 0.05), 15u);
  EXPECT_EQ(critical_u(4, 4, 0.02), 16u);
  EXPECT_EQ(critical_u(4, 4, 0.01), 17u);  // 1/70 > 0.01: none (n_a·n_b + 1)
}

TEST(CriticalU, FiveVersusFive) {
  // C(10,5) = 252. The arrangements with U = 25 - k number the partitions of k into at most 5
  // parts of at most 5: 1, 1, 2, 3, 5, 7 for k = 0..5. P(U >= 21) = 12/252 = 0.048 < 0.05,
  // P(U >= 20) = 19/252 = 0.075.
  EXPECT_EQ(critical_u(5, 5, 0.05), 21u);
}

TEST(CriticalU, ThreeVersusThreeCannotReachFivePercent) {
  // The smallest p is 1/C(6,3) = 1/20 = 0.05 exactly: not below 0.05 (no rounding of logs).
  EXPECT_EQ(min_one_sided_p(3, 3), 0.05);
  EXPECT_EQ(critical_u(3, 3, 0.05), 10u);
  EXPECT_EQ(critical_u(3, 3, 0.051), 9u);
}

TEST(CriticalU, NormalApproximationBeyondTheExactRange) {
  // 61 vs 61: mean 1860.5, sd sqrt(61·61·123/12) = 195.2953; the one-sided 5 % point with the
  // continuity correction is 1860.5 + 0.5 + 1.644854·195.2953 = 2182.23, so u* = 2183.
  EXPECT_EQ(critical_u(61, 61, 0.05), 2183u);
}

TEST(SamplesNeeded, SmallestEqualSidesThatReachAlpha) {
  EXPECT_EQ(samples_needed(0.05), 4u);  // 1/20 = 0.05 is not < 0.05; 1/70 is
  EXPECT_EQ(samples_needed(0.01), 5u);  // 1/70 = 0.014; 1/252 = 0.004
  EXPECT_EQ(samples_needed(0.2), 2u);   // 1/2, then 1/6 = 0.167
}

TEST(MinimumDetectableEffect, IdenticalSamples) {
  // A = B = {10, 11, 12, 13}, median 11.5. The 16 differences a_i - b_j are -3, -2 (x2),
  // -1 (x3), 0 (x4), 1 (x3), 2 (x2), 3: the 15th smallest is 2. Shifting B by 2.5 gives
  // {12.5, 13.5, 14.5, 15.5}: it beats 15 of 16 pairs (all but 13 vs 12.5), p = 2/70 < 0.05;
  // by 1.5 it beats 13, p = 7/70. So MDE = 2 / 11.5.
  const std::vector<double> a{10, 11, 12, 13};
  const auto e = minimum_detectable_effect(a, a, 0.05);
  ASSERT_TRUE(e.reachable);
  EXPECT_EQ(e.critical_u, 15u);
  EXPECT_DOUBLE_EQ(e.shift, 2.0);
  EXPECT_DOUBLE_EQ(e.relative, 2.0 / 11.5);
  // At alpha 0.02 only complete separation flags: every B sample above every A sample, the
  // shift max(A) - min(B) = 3.
  const auto strict = minimum_detectable_effect(a, a, 0.02);
  EXPECT_EQ(strict.critical_u, 16u);
  EXPECT_DOUBLE_EQ(strict.shift, 3.0);
}

TEST(MinimumDetectableEffect, BIsMovedOntoAsMedianFirst) {
  // B = {20, 22, 24, 26} (median 23) moved onto A's median 11.5: {8.5, 10.5, 12.5, 14.5}.
  // Its differences with A = {10..13}, sorted: -4.5 -3.5 -2.5 -2.5 -1.5 -1.5 -0.5 -0.5 0.5
  // 0.5 1.5 1.5 2.5 2.5 3.5 4.5; the 15th is 3.5. (B + 3.6 beats 15 pairs, B + 3.4 only 14.)
  // B's wider spread makes the effect harder to see than in IdenticalSamples; B's own median
  // (twice A's) plays no part.
  const auto e = minimum_detectable_effect({10, 11, 12, 13}, {20, 22, 24, 26}, 0.05);
  ASSERT_TRUE(e.reachable);
  EXPECT_DOUBLE_EQ(e.shift, 3.5);
  EXPECT_DOUBLE_EQ(e.relative, 3.5 / 11.5);
  // The shifted samples just beyond it are flagged, just short of it not.
  const std::vector<double> a{10, 11, 12, 13};
  std::vector<double> b_above, b_below;
  for (double x : {8.5, 10.5, 12.5, 14.5}) {
    b_above.push_back(x + 3.6);
    b_below.push_back(x + 3.4);
  }
  EXPECT_LT(mann_whitney_u(a, b_above).p_greater, 0.05);
  EXPECT_GE(mann_whitney_u(a, b_below).p_greater, 0.05);
}

TEST(MinimumDetectableEffect, TooFewSamplesHaveNone) {
  const auto e = minimum_detectable_effect({1, 2, 3}, {1, 2, 3}, 0.05);
  EXPECT_FALSE(e.reachable);
  EXPECT_EQ(e.samples_needed, 4u);
  const auto f = minimum_detectable_effect({1}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.05);
  EXPECT_FALSE(f.reachable);  // 1 vs n: the smallest p is 1/(n+1) = 1/11
}

TEST(MinimumDetectableEffect, NeverNegative) {
  // Tight, equal samples with alpha near 1/2 need little shift; the critical difference can
  // fall at or below zero, and no shift is reported as a negative slowdown.
  const auto e =
      minimum_detectable_effect({10, 10.1, 9.9, 10.2, 9.8}, {10, 10.1, 9.9, 10.2, 9.8}, 0.45);
  ASSERT_TRUE(e.reachable);
  EXPECT_GE(e.shift, 0.0);
}

TEST(MinimumDetectableEffect, SelectsTheSameDifferenceAsSortingThemAll) {
  // The selection without forming the n_a·n_b differences, against forming and sorting them.
  std::mt19937 rng(7);
  std::lognormal_distribution<double> t(std::log(100.0), 0.2);
  for (std::size_t na : {4, 9, 17, 40, 75})
    for (std::size_t nb : {5, 9, 30, 80}) {
      std::vector<double> a(na), b(nb);
      for (double& x : a) x = t(rng);
      for (double& x : b) x = 1.3 * t(rng);
      const auto e = minimum_detectable_effect(a, b, 0.05);
      ASSERT_TRUE(e.reachable) << na << " vs " << nb;
      std::vector<double> sa = a, sb = b;
      std::sort(sa.begin(), sa.end());
      std::sort(sb.begin(), sb.end());
      const auto med = [](const std::vector<double>& v) {
        const std::size_t n = v.size();
        return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
      };
      std::vector<double> d;
      for (double x : sa)
        for (double y : sb) d.push_back(x - (y - med(sb) + med(sa)));
      std::sort(d.begin(), d.end());
      EXPECT_DOUBLE_EQ(e.shift, std::max(0.0, d[e.critical_u - 1])) << na << " vs " << nb;
    }
}

TEST(MinimumDetectableEffect, BadInput) {
  EXPECT_ANY_THROW(minimum_detectable_effect({}, {1.0}, 0.05));
  EXPECT_ANY_THROW(samples_needed(0));
  EXPECT_ANY_THROW(samples_needed(1));
}

}  // namespace
