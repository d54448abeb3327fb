#include "dmuon/project/compute_cost.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/cuda/ns_plan.hpp"

namespace dmuon::project {
namespace {

namespace nsplan = kernels::cuda::plan;

double bytes_of(kernels::Dtype t) {
  return static_cast<double>(kernels::dtype_bytes(t));
}

// Costs the CUDA Newton–Schulz plan (kernels/cuda/ns_plan.hpp) kernel by kernel, mirroring
// kernels/cuda/newton_schulz.cu's executor: cuBLAS GEMMs, batched tile GEMMs for the
// symmetric products, one tiled kernel per mirror / polynomial, a conversion for copy_out.
struct CostingExecutor {
  const ComputeCost& cost;
  nsplan::Shape shape;
  int blocks;
  kernels::Dtype t;
  kernels::Dtype storage;
  double seconds = 0;

  double m2() const { return static_cast<double>(shape.m) * static_cast<double>(shape.m); }

  void gemm(const nsplan::RowMajorGemm& g, float, int, int, int) {
    seconds += cost.gemm(static_cast<std::int64_t>(g.m), static_cast<std::int64_t>(g.n),
                         static_cast<std::int64_t>(g.k), t);
  }
  void sym(nsplan::SymKind kind, float, int, int, int) {
    const auto plan = nsplan::sym_plan(kind, shape, blocks);
    const double b = blocks;
    const auto m = static_cast<std::int64_t>(shape.m);
    const auto k = static_cast<std::int64_t>(plan.gemm.k);
    seconds += cost.symmetric(m, k, t, blocks == 1 ? 1.0 : (b + 1) / (2 * b));
  }
  void mirror(int) { seconds += cost.elementwise(2 * m2() * bytes_of(t)); }
  void sym_poly(int, int, int, float, float, float) {
    seconds += cost.elementwise(3 * m2() * bytes_of(t));
  }
  void poly_add(int, int, float, float) { seconds += cost.elementwise(3 * m2() * bytes_of(t)); }
  void copy_out(int) {
    const double mn = static_cast<double>(shape.m) * static_cast<double>(shape.n);
    seconds += cost.elementwise(mn * (bytes_of(t) + bytes_of(storage)));
  }
};

}  // namespace

double ComputeCost::memory_time(double bytes) const {
  const auto& c = m_.compute;
  return bytes / (c.memory_bandwidth_gbps * 1e9 * c.memory_efficiency);
}

double ComputeCost::gemm_work(double m, double n, double k, kernels::Dtype t,
                              double fraction) const {
  const auto& c = m_.compute;
  const double flops = 2.0 * m * n * k * fraction;
  const double compute =
      flops / (c.peak_flops(t) * c.gemm_efficiency * utilization(m, n, k, fraction));
  const double memory = memory_time((m * k + k * n + m * n * fraction) * bytes_of(t));
  return share_ * (overhead() + std::max(compute, memory));
}

double ComputeCost::gemm_fp8(std::int64_t mi, std::int64_t ni, std::int64_t ki) const {
  if (mi <= 0 || ni <= 0 || ki <= 0) return 0;
  const auto m = static_cast<double>(mi), n = static_cast<double>(ni), k = static_cast<double>(ki);
  const double peak = fp8_peak_flops(m_) * m_.compute.fp8_gemm_efficiency;
  const double compute = 2.0 * m * n * k / (peak * utilization(m, n, k, 1.0));
  const double memory = memory_time(m * k + k * n + 2.0 * m * n);
  return share_ * (overhead() + std::max(compute, memory));
}

double ComputeCost::utilization(double m, double n, double k, double fraction) const {
  const auto& c = m_.compute;
  double util = 1.0;
  if (c.sm_count > 0) {
    const double tiles = std::ceil(m / c.tile_m) * std::ceil(n / c.tile_n) * fraction;
    const double waves = std::ceil(tiles / c.sm_count);
    util = std::min(1.0, tiles / (waves * c.sm_count));
  }
  if (c.gemm_half_dim > 0) {
    const double d = std::min({m, n, k});
    util *= d / (d + c.gemm_half_dim);
  }
  return util;
}

double ComputeCost::gemm(std::int64_t m, std::int64_t n, std::int64_t k, kernels::Dtype t) const {
  if (m <= 0 || n <= 0 || k <= 0) return 0;
  return gemm_work(static_cast<double>(m), static_cast<double>(n), static_cast<double>(k), t, 1.0);
}

double ComputeCost::symmetric(std::int64_t m, std::int64_t k, kernels::Dtype t,
                              double fraction) const {
  if (m <= 0 || k <= 0) return 0;
  return gemm_work(static_cast<double>(m), static_cast<double>(m), static_cast<double>(k), t,
                   fraction);
}

double ComputeCost::elementwise(double bytes) const {
  return share_ * (overhead() + memory_time(std::max(0.0, bytes)));
}

double ComputeCost::synthetic(std::int64_t elements, kernels::Dtype t) const {
  if (elements <= 0) return 0;
  const double n = static_cast<double>(elements);
  double s = memory_time(n * bytes_of(t));
  if (m_.compute.synthetic_elements_per_s > 0)
    s = std::max(s, n / m_.compute.synthetic_elements_per_s);
  return share_ * (overhead() + s);
}

double ComputeCost::newton_schulz(std::int64_t rows, std::int64_t cols,
                                  const kernels::NsConfig& cfg, kernels::Dtype t,
                                  kernels::Dtype input) const {
  if (rows <= 0 || cols <= 0) return 0;
  const double mn = static_cast<double>(rows) * static_cast<double>(cols);
  const auto shape =
      nsplan::ns_shape(static_cast<std::size_t>(rows), static_cast<std::size_t>(cols));
  const auto m = static_cast<std::int64_t>(shape.m), n = static_cast<std::int64_t>(shape.n);
  const double m2 = static_cast<double>(m) * static_cast<double>(m);
  if (m_.device == DeviceKind::gpu) {
    // sumsq over the input, then the normalised X̃ written in the iteration type.
    double s = elementwise(mn * bytes_of(input));
    s += elementwise(mn * (bytes_of(input) + bytes_of(t)));
    CostingExecutor e{*this, shape, nsplan::default_sym_blocks(shape.m), t, input, 0};
    const auto scales = nsplan::ns_scales(shape);
    if (cfg.variant == kernels::NsVariant::direct)
      nsplan::run_direct(e, shape, cfg, scales);
    else
      nsplan::run_gram(e, shape, cfg, scales, t != input);
    return s + e.seconds;
  }
  // The host kernel (kernels/host/newton_schulz.cpp), fp32 throughout: the norm pass and the
  // scaled copy, then BLAS: SYRK (half a GEMM) + a mirror pass for X Xᵀ, R², P²; full GEMMs
  // for P²·R, P·Q and the products with X; elementwise polynomial passes over m×m.
  const auto f32 = kernels::Dtype::f32;
  const double e = 4.0;
  auto syrk_full = [&](std::int64_t k) {
    return symmetric(m, k, f32, 0.5) + elementwise(2 * m2 * e);
  };
  double s = elementwise(mn * e) + elementwise(2 * mn * e);
  if (cfg.variant == kernels::NsVariant::direct) {
    for (int k = 0; k < cfg.steps; ++k) {
      s += gemm(m, m, n, f32);       // A = X Xᵀ (full GEMM in the direct form)
      s += elementwise(2 * m2 * e);  // B = aI + bA
      s += gemm(m, m, m, f32);       // B += c·A²
      s += gemm(m, n, m, f32);       // X <- B X
    }
    return s;
  }
  s += syrk_full(n);
  bool q_identity = true;
  for (int k = 0; k < cfg.steps; ++k) {
    if (k == kernels::kGramRestartStep && !q_identity) {
      s += gemm(m, n, m, f32) + syrk_full(n);
      q_identity = true;
    }
    s += syrk_full(m);             // R²
    s += elementwise(3 * m2 * e);  // P = aI + bR + cR²
    const bool last = k + 1 == cfg.steps, restart_next = k + 1 == kernels::kGramRestartStep;
    if (!last && !restart_next)
      s += syrk_full(m) + gemm(m, m, m, f32) + elementwise(2 * m2 * e);  // P², P²·R, symmetrize
    if (q_identity)
      q_identity = false;
    else
      s += gemm(m, m, m, f32);  // Q <- P Q
  }
  return s + gemm(m, n, m, f32);  // Q X
}

}  // namespace dmuon::project
