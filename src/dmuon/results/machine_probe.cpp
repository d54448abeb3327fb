#include "dmuon/results/machine_probe.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>

#include "dmuon/results/summary.hpp"

namespace dmuon::results {
namespace {

double median_probe(const std::vector<double>& rates) {
  std::vector<double> v;
  std::copy_if(rates.begin(), rates.end(), std::back_inserter(v),
               [](double x) { return x > 0 && std::isfinite(x); });
  return v.empty() ? 0.0 : median(v);
}

}  // namespace

double ProbeAgreement::ratio() const {
  return measured() ? b_gflops / a_gflops : std::nan("");
}

bool ProbeAgreement::disagree() const {
  const double r = ratio();
  return measured() && (r > 1 + threshold || r * (1 + threshold) < 1);
}

ProbeAgreement probe_agreement(const std::vector<double>& a_gflops,
                               const std::vector<double>& b_gflops, double tolerance) {
  ProbeAgreement p;
  p.a_gflops = median_probe(a_gflops);
  p.b_gflops = median_probe(b_gflops);
  p.threshold = std::max(tolerance, kProbeNoise);
  return p;
}

std::string verdict_given_probes(const std::string& verdict, const ProbeAgreement& p) {
  const bool timing = verdict == "slower" || verdict == "faster" || verdict == "same";
  return timing && p.disagree() ? "unreliable" : verdict;
}

std::string describe(const ProbeAgreement& p) {
  if (!p.measured()) return "sgemm probe at start: not recorded in both files";
  return fmt::format(
      "sgemm probe at start A {:.1f}, B {:.1f} GFLOP/s per rank, B/A {:.2f} {} [{:.2f}, "
      "{:.2f}]{}",
      p.a_gflops, p.b_gflops, p.ratio(), p.disagree() ? "outside" : "within", 1 / (1 + p.threshold),
      1 + p.threshold, p.disagree() ? (p.b_busier() ? " (B busier)" : " (A busier)") : "");
}

}  // namespace dmuon::results
