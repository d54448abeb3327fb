#pragma once
// The latency–bandwidth line of a collective fitted to times measured at several sizes
// (dmuon_project --calibrate): t = latency + x / bandwidth, x = the message's bytes times the
// nccl-tests bus-bandwidth factor. Weighted least squares on relative errors (weights 1/t²),
// so a small message weighs as much as a large one and one slow point (a 4 MB transfer that
// left the cache while other jobs used the memory) cannot set the line alone. A negative
// intercept is clamped to 0 and the slope refitted through the origin.

#include <vector>

namespace dmuon::project {

struct LatencyFit {
  double latency_s = 0;
  double bandwidth = 0;  ///< x units per second (bytes·factor / s: the bus bandwidth)
};

/// `x` and `t` of equal length >= 2, t > 0, x >= 0 with two distinct values; else
/// std::invalid_argument.
LatencyFit fit_latency_bandwidth(const std::vector<double>& x, const std::vector<double>& t);

}  // namespace dmuon::project
