// The --check metric, apart from the reference computation so builds without the host
// kernels (the GPU check build) compare the same way.
#include <algorithm>
#include <cmath>

#include "dmuon/engine/verify/reference.hpp"

namespace dmuon::engine {

double max_relative_error(const model::ModuleTree& tree, const std::vector<std::vector<float>>& a,
                          const std::vector<std::vector<float>>& b, std::string* worst,
                          const AdamwEpsRegime* excuse, std::int64_t* excused) {
  if (a.size() != b.size()) return INFINITY;
  if (excuse && excuse->elements.size() != a.size()) return INFINITY;
  double worst_err = 0;
  const auto& order = tree.parameter_order();
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].size() != b[i].size()) return INFINITY;
    double diff2 = 0, ref2 = 0;
    for (std::size_t j = 0; j < a[i].size(); ++j) {
      const double d = static_cast<double>(a[i][j]) - b[i][j];
      diff2 += d * d;
      ref2 += static_cast<double>(b[i][j]) * b[i][j];
    }
    if (excuse)
      for (const auto& [j, steps] : excuse->elements[i]) {
        const auto k = static_cast<std::size_t>(j);
        if (k >= a[i].size()) return INFINITY;
        const double d = static_cast<double>(a[i][k]) - b[i][k];
        if (std::fabs(d) > excuse->bound_per_step * steps) continue;  // beyond rounding: counts
        diff2 = std::max(0.0, diff2 - d * d);
        // Counted when it moved by an AdamW-regime amount, not by rounding alone.
        if (excused && std::fabs(d) > 0.01 * excuse->bound_per_step) ++*excused;
      }
    double err = std::sqrt(diff2) / std::max(std::sqrt(ref2), 1e-30);
    if (std::isnan(err)) err = INFINITY;
    if (err > worst_err || (worst && worst->empty())) {
      worst_err = std::max(worst_err, err);
      if (worst && i < order.size()) *worst = tree.parameter(order[i]).name;
    }
  }
  return worst_err;
}

}  // namespace dmuon::engine
