#pragma once
// Newton–Schulz coefficient schedules and the shared configuration types (SPEC §7).

#include <cstddef>
#include <string_view>
#include <vector>

namespace dmuon::kernels {

/// One quintic step X <- a X + b (X Xᵀ) X + c (X Xᵀ)² X.
struct NsCoefficients {
  double a;
  double b;
  double c;
};

/// classic_muon: (3.4445, -4.7750, 2.0315) every step.
/// polar_express: the five Polar Express triples of SPEC §7, each divided by
/// (1.05, 1.05³, 1.05⁵); the reference implementation's default.
enum class NsCoefficientSet { classic_muon, polar_express };

/// direct: iterate on X (m×n). gram: iterate on R = X Xᵀ (m×m) with a polynomial Q in R,
/// restarting once before step index 2; cheaper when the matrix is far from square.
enum class NsVariant { direct, gram };

struct NsConfig {
  NsCoefficientSet coefficients = NsCoefficientSet::polar_express;
  NsVariant variant = NsVariant::direct;
  int steps = 5;
  float eps = 1e-7f;  ///< X / (‖X‖_F + eps)
};

/// The per-step coefficients for `steps` steps (steps >= 1, else KernelError).
/// Schedules of any length: classic Muon repeats its triple; Polar Express uses its five
/// triples in order and repeats the last one (the most conservative, a fixed point near 1)
/// past step 5, which keeps the singular values in the converged band.
std::vector<NsCoefficients> ns_schedule(NsCoefficientSet set, int steps);

/// Coefficients of step `index` (0-based) of that schedule, without allocating.
NsCoefficients ns_step_coefficients(NsCoefficientSet set, int index);

/// Step index before which the Gram form restarts (X <- Q X, R <- X Xᵀ), per SPEC §7.
inline constexpr int kGramRestartStep = 2;

/// Direct-NS FLOPs (SPEC §7) for `steps` steps on a rows×cols matrix: steps·(4m²n + 2m³),
/// m = min, n = max. Benchmarks use it for both forms, so Gram speedups show as higher GFLOP/s.
double ns_direct_flops(std::size_t rows, std::size_t cols, int steps);

std::string_view to_string(NsCoefficientSet set);
std::string_view to_string(NsVariant variant);

}  // namespace dmuon::kernels
