#pragma once
// The Mann–Whitney U test (Wilcoxon rank-sum) on two independent samples: does B tend to be
// larger (or smaller) than A? dmuon_compare decides timing regressions with it, as Google
// Benchmark's tools/compare.py does for repetitions: distribution-free, robust to the heavy
// right tail of timings on a shared machine, and honest about small samples (3 vs 3 samples
// cannot reach p < 0.05 one-sided: the smallest p is 1/C(6,3) = 0.05).
//
// Exact p-values (the permutation distribution of U, a Gaussian binomial coefficient) when
// there are no ties and both samples hold at most kExactMax values; otherwise the normal
// approximation with the tie correction and a continuity correction of 1/2.

#include <cstddef>
#include <vector>

namespace dmuon::results {

struct UTest {
  std::size_t n_a = 0, n_b = 0;
  /// U of B: pairs (a, b) with b > a, ties counting 1/2 (0 ≤ U ≤ n_a·n_b).
  double u_b = 0;
  /// One-sided p-values: P(U ≥ u_b) under H0 ("B is not larger") and P(U ≤ u_b) ("not smaller").
  double p_greater = 1, p_less = 1;
  /// Smallest one-sided p-value these sample sizes can give: 1 / C(n_a + n_b, n_a).
  double min_p = 1;
  bool exact = false;
};

/// Largest sample size per side for the exact distribution.
inline constexpr std::size_t kExactMax = 60;

/// The test of B against A. Both samples must be non-empty and finite (callers screen them).
UTest mann_whitney_u(const std::vector<double>& a, const std::vector<double>& b);

/// 1 / C(n_a + n_b, n_a): the p-value of complete separation.
double min_one_sided_p(std::size_t n_a, std::size_t n_b);

/// The critical value of the one-sided test: the smallest u with P(U_B >= u) < alpha when A and
/// B come from one distribution (exact up to kExactMax a side, else the normal approximation
/// with the continuity correction, as mann_whitney_u computes p without ties); n_a·n_b + 1 when
/// no u reaches alpha (min_one_sided_p >= alpha). Both sizes must be positive.
std::size_t critical_u(std::size_t n_a, std::size_t n_b, double alpha);

}  // namespace dmuon::results
