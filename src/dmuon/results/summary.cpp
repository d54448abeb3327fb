#include "dmuon/results/summary.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace dmuon::results {

double median(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::map<std::string, double> timing_medians(const Timings& t) {
  std::map<std::string, double> out;
  if (t.steps <= 0 || t.ranks <= 0) return out;
  std::vector<double> step(static_cast<std::size_t>(t.steps), 0.0);
  std::vector<std::vector<double>> phase(t.phases.size(),
                                         std::vector<double>(static_cast<std::size_t>(t.steps)));
  for (std::int64_t s = 0; s < t.steps; ++s) {
    const auto si = static_cast<std::size_t>(s);
    for (std::int64_t r = 0; r < t.ranks; ++r) {
      double sum = 0;
      for (std::size_t p = 0; p < t.phases.size(); ++p) {
        const double x = t.at(s, r, p);
        sum += x;
        phase[p][si] = std::max(phase[p][si], x);
      }
      step[si] = std::max(step[si], sum);
    }
  }
  out["step_ms"] = 1e3 * median(step);
  for (std::size_t p = 0; p < t.phases.size(); ++p)
    out[t.phases[p] + "_ms"] = 1e3 * median(phase[p]);
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
  return lookup(r, "step_ms");
}
double run_optimizer_ms(const RunRecord& r) {
  return lookup(r, "optimizer_ms");
}

}  // namespace dmuon::results
