#pragma once
// The minimum detectable effect of a timing comparison: with the samples each side has, their
// spread and the test's alpha, the smallest relative slowdown of B the one-sided Mann–Whitney
// U test could have flagged. A comparison that finds "no regression" says little when this is
// larger than the slowdown one cares about; dmuon_compare prints it next to every verdict.
//
// Definition (a shift model, the one behind the Hodges–Lehmann estimate and Moses' confidence
// bound for a shift): move B's samples so their median equals A's (b'_j = b_j - med B + med A:
// no observed effect), then shift them all by d. U_B(d) counts the pairs with b'_j + d > a_i,
// i.e. the differences a_i - b'_j below d. The test flags B once U_B reaches the critical value
// u* (the smallest u with P(U_B >= u) < alpha), so the smallest flagged shift is d* = the u*-th
// smallest of the n_a·n_b differences (any shift above it is flagged), and
//     MDE = max(d*, 0) / median(A).
// Complete separation (every B sample above every A sample) is the case u* = n_a·n_b; larger
// samples need less than that. When even complete separation cannot reach alpha (1/C(n_a+n_b,
// n_a) >= alpha) there is no MDE: the samples are too few, and samples_needed says how many.

#include <cstddef>
#include <vector>

namespace dmuon::results {

struct DetectableEffect {
  /// The test can reach alpha with these sample sizes: 1/C(n_a + n_b, n_a) < alpha.
  bool reachable = false;
  /// The smallest n with 1/C(2n, n) < alpha: samples per side the test needs at all.
  std::size_t samples_needed = 0;
  std::size_t critical_u = 0;  ///< u*: U_B at which the test flags B (when reachable)
  double shift = 0;            ///< d*, in the samples' unit (when reachable)
  double relative = 0;         ///< MDE = d* / median(A) (when reachable and median(A) > 0)
};

/// The smallest n per side for which the one-sided test can reach p < alpha (4 at 0.05).
std::size_t samples_needed(double alpha);

/// The MDE of B against A at alpha. Both samples must be non-empty and finite; alpha in (0, 1).
DetectableEffect minimum_detectable_effect(const std::vector<double>& a,
                                           const std::vector<double>& b, double alpha);

}  // namespace dmuon::results
