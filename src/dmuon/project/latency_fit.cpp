#include "dmuon/project/latency_fit.hpp"

#include <stdexcept>

namespace dmuon::project {

LatencyFit fit_latency_bandwidth(const std::vector<double>& x, const std::vector<double>& t) {
  if (x.size() != t.size() || x.size() < 2)
    throw std::invalid_argument("latency fit: needs >= 2 (size, time) points");
  double sw = 0, swx = 0, swxx = 0, swt = 0, swxt = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (!(t[i] > 0) || !(x[i] >= 0))
      throw std::invalid_argument("latency fit: times must be > 0 and sizes >= 0");
    const double w = 1.0 / (t[i] * t[i]);
    sw += w;
    swx += w * x[i];
    swxx += w * x[i] * x[i];
    swt += w * t[i];
    swxt += w * x[i] * t[i];
  }
  const double det = sw * swxx - swx * swx;
  if (!(det > 0)) throw std::invalid_argument("latency fit: needs two distinct sizes");
  double slope = (sw * swxt - swx * swt) / det;
  double intercept = (swt - slope * swx) / sw;
  if (intercept < 0) {
    intercept = 0;
    slope = swxt / swxx;
  }
  if (!(slope > 0)) throw std::invalid_argument("latency fit: time does not grow with size");
  return {intercept, 1.0 / slope};
}

}  // namespace dmuon::project
