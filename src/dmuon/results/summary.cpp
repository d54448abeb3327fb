#include "dmuon/results/summary.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace dmuon::results {

double median(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  for (double x : v)
    if (std::isnan(x)) return x;  // (sorting NaNs is undefined; a NaN sample poisons the median)
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

namespace {

// max over ranks of f(step, rank) per step; a NaN anywhere makes that step NaN (std::max
// would hide it), so non-finite timings stay visible to the gate.
template <typename F>
std::vector<double> max_over_ranks(const Timings& t, F f) {
  std::vector<double> out;
  if (t.steps <= 0 || t.ranks <= 0) return out;
  for (std::int64_t s = 0; s < t.steps; ++s) {
    double m = -std::numeric_limits<double>::infinity();
    for (std::int64_t r = 0; r < t.ranks; ++r) {
      const double x = f(s, r);
      if (std::isnan(x) || std::isnan(m))
        m = std::numeric_limits<double>::quiet_NaN();
      else
        m = std::max(m, x);
    }
    out.push_back(m);
  }
  return out;
}

}  // namespace

std::vector<double> step_samples(const Timings& t) {
  const auto ranks = static_cast<std::size_t>(std::max<std::int64_t>(t.ranks, 0));
  const bool wall =
      !t.step_seconds.empty() && t.step_seconds.size() == static_cast<std::size_t>(t.steps) * ranks;
  return max_over_ranks(t, [&](std::int64_t s, std::int64_t r) {
    if (wall) return t.step_seconds[static_cast<std::size_t>(s * t.ranks + r)];
    double sum = 0;
    for (std::size_t p = 0; p < t.phases.size(); ++p) sum += t.at(s, r, p);
    return sum;
  });
}

std::vector<double> phase_samples(const Timings& t, const std::string& prefix) {
  std::vector<std::size_t> idx;
  for (std::size_t p = 0; p < t.phases.size(); ++p)
    if (t.phases[p].rfind(prefix, 0) == 0) idx.push_back(p);
  if (idx.empty()) return {};
  return max_over_ranks(t, [&](std::int64_t s, std::int64_t r) {
    double sum = 0;
    for (std::size_t p : idx) sum += t.at(s, r, p);
    return sum;
  });
}

std::map<std::string, double> timing_medians(const Timings& t) {
  std::map<std::string, double> out;
  if (t.steps <= 0 || t.ranks <= 0) return out;
  out[summary_key::step_ms.name] = 1e3 * median(step_samples(t));
  for (const auto& p : t.phases) {
    std::vector<double> v = max_over_ranks(t, [&](std::int64_t s, std::int64_t r) {
      const auto i = static_cast<std::size_t>(std::find(t.phases.begin(), t.phases.end(), p) -
                                              t.phases.begin());
      return t.at(s, r, i);
    });
    out[p + "_ms"] = 1e3 * median(v);
  }
  return out;
}

namespace {
double lookup(const RunRecord& r, const std::string& key) {
  const auto it = r.summary.find(key);
  if (it != r.summary.end()) return it->second;
  const auto m = timing_medians(r.timings);
  const auto jt = m.find(key);
  return jt != m.end() ? jt->second : std::numeric_limits<double>::quiet_NaN();
}
}  // namespace

double run_step_ms(const RunRecord& r) {
  return lookup(r, summary_key::step_ms.name);
}
double run_optimizer_ms(const RunRecord& r) {
  return lookup(r, summary_key::optimizer_ms.name);
}

}  // namespace dmuon::results
