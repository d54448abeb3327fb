#include "dmuon/results/detectable_effect.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "dmuon/base/error.hpp"
#include "dmuon/results/mann_whitney.hpp"
#include "dmuon/results/summary.hpp"

namespace dmuon::results {
namespace {

// Pairs (i, j) with a_i - b_j <= v, for ascending a and b. x - b_j falls as j grows and rises
// with x, so the first j where it is <= v only moves right: one pass.
std::size_t count_at_most(const std::vector<double>& a, const std::vector<double>& b, double v) {
  std::size_t n = 0, j = 0;
  for (double x : a) {
    while (j < b.size() && x - b[j] > v) ++j;
    n += b.size() - j;
  }
  return n;
}

// The k-th smallest (1-based) of the n_a·n_b differences a_i - b_j, without forming them
// (large samples would need n_a·n_b doubles): bisect on the value down to adjacent doubles,
// then take the smallest difference above the lower end, which is the answer.
double kth_difference(const std::vector<double>& a, const std::vector<double>& b, std::size_t k) {
  double lo = a.front() - b.back(), hi = a.back() - b.front();
  if (count_at_most(a, b, lo) >= k) return lo;
  for (int it = 0; it < 4096; ++it) {  // ~64 halvings per binade crossed; never near this
    const double mid = lo + (hi - lo) / 2;
    if (!(mid > lo && mid < hi)) break;
    (count_at_most(a, b, mid) >= k ? hi : lo) = mid;
  }
  double best = hi;
  std::size_t j = 0;  // per a_i (ascending): the last b_j with a_i - b_j > lo
  for (double x : a) {
    while (j < b.size() && x - b[j] > lo) ++j;
    if (j > 0) best = std::min(best, x - b[j - 1]);
  }
  return best;
}

}  // namespace

std::size_t samples_needed(double alpha) {
  if (!(alpha > 0 && alpha < 1))
    throw InputError(fmt::format("alpha {} is invalid (valid: (0, 1))", alpha));
  std::size_t n = 1;
  while (!(min_one_sided_p(n, n) < alpha)) ++n;  // 1/C(2n, n) falls about 4x per step
  return n;
}

DetectableEffect minimum_detectable_effect(const std::vector<double>& a,
                                           const std::vector<double>& b, double alpha) {
  if (a.empty() || b.empty())
    throw RuntimeFailure("minimum_detectable_effect needs two non-empty samples");
  DetectableEffect e;
  e.samples_needed = samples_needed(alpha);
  e.reachable = min_one_sided_p(a.size(), b.size()) < alpha;
  if (!e.reachable) return e;
  e.critical_u = critical_u(a.size(), b.size(), alpha);
  if (e.critical_u > a.size() * b.size()) {  // 1/C at alpha to rounding: not reachable either
    e.reachable = false;
    return e;
  }
  const double med_a = median(a), med_b = median(b);
  std::vector<double> sa = a, sb;
  sb.reserve(b.size());
  for (double x : b) sb.push_back(x - med_b + med_a);  // B moved onto A's median
  std::sort(sa.begin(), sa.end());
  std::sort(sb.begin(), sb.end());
  e.shift = std::max(0.0, kth_difference(sa, sb, e.critical_u));
  e.relative = med_a > 0 ? e.shift / med_a : std::nan("");
  return e;
}

}  // namespace dmuon::results
