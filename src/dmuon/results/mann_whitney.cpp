#include "dmuon/results/mann_whitney.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "dmuon/base/error.hpp"

namespace dmuon::results {
namespace {

// The null distribution of U_B: P[u] = probability that U_B = u when all C(n_a + n_b, n_a)
// arrangements of the pooled sample are equally likely. Recurrence on the largest value: it is
// a B value with probability j/(i+j) (then it exceeds all i A values: U += i) or an A value.
// Only additions of non-negative terms, so it stays accurate far into the tail.
std::vector<double> u_distribution(std::size_t n_a, std::size_t n_b) {
  const std::size_t size = n_a * n_b + 1;
  // prev[i] = distribution for (i, j-1); cur[i] for (i, j).
  std::vector<std::vector<double>> prev(n_a + 1, std::vector<double>(size, 0.0)), cur = prev;
  for (std::size_t i = 0; i <= n_a; ++i) prev[i][0] = 1.0;  // j = 0: U = 0
  for (std::size_t j = 1; j <= n_b; ++j) {
    std::fill(cur[0].begin(), cur[0].end(), 0.0);
    cur[0][0] = 1.0;  // i = 0: U = 0
    for (std::size_t i = 1; i <= n_a; ++i) {
      const double pb = static_cast<double>(j) / static_cast<double>(i + j);
      auto& c = cur[i];
      for (std::size_t u = 0; u < size; ++u)
        c[u] = (1 - pb) * cur[i - 1][u] + (u >= i ? pb * prev[i][u - i] : 0.0);
    }
    std::swap(prev, cur);
  }
  return prev[n_a];
}

}  // namespace

double min_one_sided_p(std::size_t n_a, std::size_t n_b) {
  // Exactly while C(n_a + n_b, k) stays an integer a double holds (each partial product
  // C(n - k + i, i) is one), so that 3 vs 3 gives exactly 1/20 and does not pass "p < 0.05"
  // by a rounding of the logs; in logs beyond (no overflow for large samples).
  const std::size_t k = std::min(n_a, n_b), n = n_a + n_b;
  double c = 1;
  std::size_t i = 1;
  for (; i <= k && c * static_cast<double>(n - k + i) < 0x1p53; ++i)
    c = c * static_cast<double>(n - k + i) / static_cast<double>(i);
  if (i > k) return 1 / c;
  const double lg = std::lgamma(static_cast<double>(n_a + n_b) + 1) -
                    std::lgamma(static_cast<double>(n_a) + 1) -
                    std::lgamma(static_cast<double>(n_b) + 1);
  return std::exp(-lg);
}

std::size_t critical_u(std::size_t n_a, std::size_t n_b, double alpha) {
  if (n_a == 0 || n_b == 0) throw RuntimeFailure("critical_u needs two non-empty samples");
  const std::size_t top = n_a * n_b;
  if (n_a <= kExactMax && n_b <= kExactMax) {
    // Accumulate the upper tail from U = n_a·n_b down while it stays below alpha.
    const auto c = u_distribution(n_a, n_b);
    double tail = 0;
    std::size_t u = top + 1;
    while (u > 0 && tail + c[u - 1] < alpha) tail += c[--u];
    return u;
  }
  // Normal approximation: P(U >= u) = Q((u - mean - 1/2) / sd) falls with u; bisect for the
  // first u below alpha.
  const double na = static_cast<double>(n_a), nb = static_cast<double>(n_b);
  const double mean = na * nb / 2, sd = std::sqrt(na * nb * (na + nb + 1) / 12);
  const auto p = [&](std::size_t u) {
    return 0.5 * std::erfc((static_cast<double>(u) - mean - 0.5) / sd / std::sqrt(2.0));
  };
  if (!(p(top) < alpha)) return top + 1;
  std::size_t lo = 0, hi = top;  // p(hi) < alpha; invariant: the answer is in (lo, hi]
  if (p(lo) < alpha) return lo;
  while (hi - lo > 1) {
    const std::size_t mid = lo + (hi - lo) / 2;
    (p(mid) < alpha ? hi : lo) = mid;
  }
  return hi;
}

UTest mann_whitney_u(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.empty() || b.empty())
    throw RuntimeFailure("Mann-Whitney U test needs two non-empty samples");
  UTest t;
  t.n_a = a.size();
  t.n_b = b.size();
  t.min_p = min_one_sided_p(t.n_a, t.n_b);

  // Pool, sort, and rank with mid-ranks for ties; record the tie groups.
  std::vector<std::pair<double, int>> pool;
  pool.reserve(t.n_a + t.n_b);
  for (double x : a) pool.emplace_back(x, 0);
  for (double x : b) pool.emplace_back(x, 1);
  std::sort(pool.begin(), pool.end());
  const std::size_t n = pool.size();
  double rank_sum_b = 0, tie_term = 0;
  bool ties = false;
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i;
    while (j < n && pool[j].first == pool[i].first) ++j;
    const double mid = 0.5 * static_cast<double>(i + 1 + j);  // mean of ranks i+1 .. j
    for (std::size_t k = i; k < j; ++k)
      if (pool[k].second == 1) rank_sum_b += mid;
    const double g = static_cast<double>(j - i);
    if (j - i > 1) {
      ties = true;
      tie_term += g * g * g - g;
    }
    i = j;
  }
  const double nb = static_cast<double>(t.n_b), na = static_cast<double>(t.n_a);
  t.u_b = rank_sum_b - nb * (nb + 1) / 2;

  if (!ties && t.n_a <= kExactMax && t.n_b <= kExactMax) {
    t.exact = true;
    const auto c = u_distribution(t.n_a, t.n_b);
    const auto u = static_cast<std::size_t>(std::llround(t.u_b));
    double ge = 0, le = 0;
    for (std::size_t k = 0; k < c.size(); ++k) {
      if (k >= u) ge += c[k];
      if (k <= u) le += c[k];
    }
    t.p_greater = std::min(1.0, ge);
    t.p_less = std::min(1.0, le);
    return t;
  }
  const double N = na + nb;
  const double mean = na * nb / 2;
  const double var = na * nb / 12 * ((N + 1) - tie_term / (N * (N - 1)));
  if (!(var > 0)) {  // every value equal: no evidence either way
    t.p_greater = t.p_less = 1;
    return t;
  }
  const double sd = std::sqrt(var);
  const double z_greater = (t.u_b - mean - 0.5) / sd;
  const double z_less = (t.u_b - mean + 0.5) / sd;
  t.p_greater = 0.5 * std::erfc(z_greater / std::sqrt(2.0));
  t.p_less = 0.5 * std::erfc(-z_less / std::sqrt(2.0));
  t.p_greater = std::min(1.0, t.p_greater);
  t.p_less = std::min(1.0, t.p_less);
  return t;
}

}  // namespace dmuon::results
