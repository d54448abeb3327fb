#include "kernels/ns_coefficients.hpp"

#include <algorithm>
#include <string>

#include "kernels/kernel_error.hpp"

namespace dmuon::kernels {

namespace {
constexpr NsCoefficients kClassic{3.4445, -4.7750, 2.0315};
// Raw Polar Express triples (SPEC §7); divided by the safety factors below when used.
constexpr NsCoefficients kPolarRaw[5] = {
    {8.28721201814563, -23.595886519098837, 17.300387312530933},
    {4.107059111542203, -2.9478499167379106, 0.5448431082926601},
    {3.9486908534822946, -2.908902115962949, 0.5518191394370137},
    {3.3184196573706015, -2.488488024314874, 0.51004894012372},
    {2.300652019954817, -1.6689039845747493, 0.4188073119525673},
};
}  // namespace

std::vector<NsCoefficients> ns_schedule(NsCoefficientSet set, int steps) {
  if (steps < 1) {
    throw KernelError("Newton-Schulz steps must be >= 1, got " + std::to_string(steps));
  }
  std::vector<NsCoefficients> out;
  out.reserve(static_cast<std::size_t>(steps));
  for (int i = 0; i < steps; ++i) out.push_back(ns_step_coefficients(set, i));
  return out;
}

NsCoefficients ns_step_coefficients(NsCoefficientSet set, int index) {
  if (index < 0) throw KernelError("Newton-Schulz step index must be >= 0");
  if (set == NsCoefficientSet::classic_muon) return kClassic;
  const double s1 = 1.05, s3 = 1.05 * 1.05 * 1.05, s5 = s3 * 1.05 * 1.05;
  const NsCoefficients& r = kPolarRaw[std::min(index, 4)];
  return {r.a / s1, r.b / s3, r.c / s5};
}

double ns_direct_flops(std::size_t rows, std::size_t cols, int steps) {
  const double m = static_cast<double>(std::min(rows, cols));
  const double n = static_cast<double>(std::max(rows, cols));
  return steps * (4.0 * m * m * n + 2.0 * m * m * m);
}

std::string_view to_string(NsCoefficientSet set) {
  return set == NsCoefficientSet::classic_muon ? "classic_muon" : "polar_express";
}

std::string_view to_string(NsVariant variant) {
  return variant == NsVariant::direct ? "direct" : "gram";
}

}  // namespace dmuon::kernels
