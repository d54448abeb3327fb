#include "kernels/newton_schulz.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "kernels/host/views.hpp"
#include "kernels/kernel_error.hpp"
#include "kernels/scoped_kokkos.hpp"

namespace dmuon::kernels::host {

using detail::Mat;
using detail::range;

NsWorkspace::NsWorkspace(std::size_t rows, std::size_t cols) : rows_(rows), cols_(cols) {
  if (rows == 0 || cols == 0) {
    throw KernelError("NsWorkspace: shape must be positive, got " + std::to_string(rows) + "x" +
                      std::to_string(cols));
  }
  const std::size_t mn = rows * cols, m = std::min(rows, cols), mm = m * m;
  x.resize(mn);
  xn.resize(mn);
  a.resize(mm);
  b.resize(mm);
  q.resize(mm);
  t.resize(mm);
  u.resize(mm);
  muon_in.resize(mn);
  muon_out.resize(mn);
}

std::size_t NsWorkspace::bytes() const {
  return sizeof(float) * (x.size() + xn.size() + a.size() + b.size() + q.size() + t.size() +
                          u.size() + muon_in.size() + muon_out.size());
}

namespace {

// The matrix being iterated is always the wide one, X (m×n, m <= n). It is stored in the
// caller's orientation: row-major X itself when !trans, row-major Xᵀ (n×m) when trans, so the
// transposition lives in the GEMM flags and no transpose copy is made.
struct Shape {
  std::size_t m, n;
  bool trans;
};

// a = X Xᵀ (m×m) with a plain GEMM (direct form: the reference arithmetic).
void gram_gemm(const Shape& s, const float* x, float* a) {
  if (!s.trans) {
    detail::gemm(false, true, s.m, s.m, s.n, 1.0f, x, x, 0.0f, a);
  } else {
    detail::gemm(true, false, s.m, s.m, s.n, 1.0f, x, x, 0.0f, a);
  }
}

// out = P X (P m×m), in the stored orientation: X·... when trans, out = Xᵀ-stored · Pᵀ.
void apply_left(const Shape& s, const float* p, const float* x, float* out) {
  if (!s.trans) {
    detail::gemm(false, false, s.m, s.n, s.m, 1.0f, p, x, 0.0f, out);
  } else {
    detail::gemm(false, true, s.n, s.m, s.m, 1.0f, x, p, 0.0f, out);
  }
}

// b = a·I + bc·A + (cc·A·A is added by the caller's GEMM); A m×m.
void poly_init(std::size_t m, const float* a_in, float* b_out, float a, float b) {
  Mat av(const_cast<float*>(a_in), m, m);
  Mat bv(b_out, m, m);
  Kokkos::parallel_for(
      "dmuon::ns_poly", range(m), KOKKOS_LAMBDA(const std::size_t i) {
        for (std::size_t j = 0; j < m; ++j) bv(i, j) = b * av(i, j);
        bv(i, i) += a;
      });
}

// p = a·I + b·R + c·R2 (all m×m, elementwise).
void poly_combine(std::size_t m, const float* r, const float* r2, float* p, float a, float b,
                  float c) {
  Mat rv(const_cast<float*>(r), m, m);
  Mat r2v(const_cast<float*>(r2), m, m);
  Mat pv(p, m, m);
  Kokkos::parallel_for(
      "dmuon::ns_gram_poly", range(m), KOKKOS_LAMBDA(const std::size_t i) {
        for (std::size_t j = 0; j < m; ++j) pv(i, j) = b * rv(i, j) + c * r2v(i, j);
        pv(i, i) += a;
      });
}

// r = (r + rᵀ) / 2: products of commuting symmetric matrices are symmetric only up to
// rounding; SYRK of r next step assumes r = rᵀ, so remove the drift.
void symmetrize(std::size_t m, float* r) {
  Mat rv(r, m, m);
  Kokkos::parallel_for(
      "dmuon::ns_symmetrize", range(m), KOKKOS_LAMBDA(const std::size_t i) {
        for (std::size_t j = i + 1; j < m; ++j) {
          const float v = 0.5f * (rv(i, j) + rv(j, i));
          rv(i, j) = v;
          rv(j, i) = v;
        }
      });
}

// x = g / (‖g‖_F + eps); throws naming the parameter if g is not finite.
void normalise(const float* g, float* x, std::size_t count, float eps, std::string_view name) {
  detail::ConstVec gv(g, count);
  detail::Vec xv(x, count);
  double sumsq = 0.0;
  // Accumulate in double: exact enough for any fp32 input, and overflow-free, so a non-finite
  // sum means a non-finite input (the check costs no extra pass).
  Kokkos::parallel_reduce(
      "dmuon::ns_sumsq", range(count),
      KOKKOS_LAMBDA(const std::size_t i, double& acc) {
        const double v = gv(i);
        acc += v * v;
      },
      sumsq);
  if (!std::isfinite(sumsq)) {
    detail::check_finite(g, count, "newton_schulz", "input", name);
  }
  const float denom = static_cast<float>(std::sqrt(sumsq)) + eps;
  const float inv = 1.0f / denom;
  Kokkos::parallel_for(
      "dmuon::ns_normalise", range(count),
      KOKKOS_LAMBDA(const std::size_t i) { xv(i) = gv(i) * inv; });
}

void ns_direct(const Shape& s, const NsConfig& cfg, NsWorkspace& ws, float* out) {
  float* x = ws.x.data();
  float* xn = ws.xn.data();
  const std::size_t m = s.m;
  for (std::size_t k = 0; k < static_cast<std::size_t>(cfg.steps); ++k) {
    const NsCoefficients co = ns_step_coefficients(cfg.coefficients, static_cast<int>(k));
    gram_gemm(s, x, ws.a.data());  // A = X Xᵀ
    poly_init(m, ws.a.data(), ws.b.data(), static_cast<float>(co.a), static_cast<float>(co.b));
    detail::gemm(false, false, m, m, m, static_cast<float>(co.c), ws.a.data(), ws.a.data(), 1.0f,
                 ws.b.data());  // B = aI + bA + cA²
    float* dst = (k + 1 == static_cast<std::size_t>(cfg.steps)) ? out : xn;
    apply_left(s, ws.b.data(), x, dst);  // X <- B X
    std::swap(x, xn);
  }
}

void ns_gram(const Shape& s, const NsConfig& cfg, NsWorkspace& ws, float* out) {
  const std::size_t m = s.m, n = s.n;
  float* x = ws.x.data();
  float* xn = ws.xn.data();
  float* r = ws.a.data();  // R = X Xᵀ of the current restart's X, advanced as R <- P² R
  float* p = ws.b.data();  // P = aI + bR + cR²
  float* q = ws.q.data();  // Q = product of the P's since the last restart
  float* t = ws.t.data();
  float* u = ws.u.data();
  detail::syrk_full(s.trans, m, n, 1.0f, x, r);
  bool q_identity = true;
  const std::size_t steps = static_cast<std::size_t>(cfg.steps);
  for (std::size_t k = 0; k < steps; ++k) {
    if (k == static_cast<std::size_t>(kGramRestartStep) && !q_identity) {
      // Restart (SPEC §7): fold Q into X and recompute R from it, which bounds the error that
      // the polynomial recursion in R accumulates in fp32.
      if (!s.trans) {
        detail::gemm(false, false, m, n, m, 1.0f, q, x, 0.0f, xn);
      } else {
        detail::gemm(false, true, n, m, m, 1.0f, x, q, 0.0f, xn);
      }
      std::swap(x, xn);
      detail::syrk_full(s.trans, m, n, 1.0f, x, r);
      q_identity = true;
    }
    const NsCoefficients co = ns_step_coefficients(cfg.coefficients, static_cast<int>(k));
    detail::syrk_full(false, m, m, 1.0f, r, t);  // R² = R Rᵀ (R symmetric): SYRK, half a GEMM
    poly_combine(m, r, t, p, static_cast<float>(co.a), static_cast<float>(co.b),
                 static_cast<float>(co.c));
    const bool last = (k + 1 == steps);
    const bool restart_next = (k + 1 == static_cast<std::size_t>(kGramRestartStep));
    if (!last && !restart_next) {
      // R <- P R P = P² R (P is a polynomial in R, so they commute); P² by SYRK.
      detail::syrk_full(false, m, m, 1.0f, p, t);
      detail::gemm(false, false, m, m, m, 1.0f, t, r, 0.0f, u);
      std::swap(r, u);
      symmetrize(m, r);
    }
    if (q_identity) {
      std::swap(q, p);  // Q = P
      q_identity = false;
    } else {
      detail::gemm(false, false, m, m, m, 1.0f, p, q, 0.0f, t);  // Q <- P Q
      std::swap(q, t);
    }
  }
  // Output Q X (X Q ᵀ in the transposed storage).
  if (!s.trans) {
    detail::gemm(false, false, m, n, m, 1.0f, q, x, 0.0f, out);
  } else {
    detail::gemm(false, true, n, m, m, 1.0f, x, q, 0.0f, out);
  }
}

}  // namespace

void newton_schulz(const float* g, float* out, std::size_t rows, std::size_t cols,
                   const NsConfig& config, NsWorkspace& workspace, std::string_view name) {
  require_kokkos("newton_schulz");
  if (g == nullptr || out == nullptr) {
    throw KernelError("newton_schulz: null pointer for parameter " + detail::quoted(name));
  }
  if (rows == 0 || cols == 0 || rows != workspace.rows() || cols != workspace.cols()) {
    throw KernelError("newton_schulz: parameter " + detail::quoted(name) + " is " +
                      std::to_string(rows) + "x" + std::to_string(cols) + " but the workspace is " +
                      std::to_string(workspace.rows()) + "x" + std::to_string(workspace.cols()));
  }
  if (config.steps < 1) {
    throw KernelError("newton_schulz: steps must be >= 1 for parameter " + detail::quoted(name));
  }
  const Shape s{std::min(rows, cols), std::max(rows, cols), rows > cols};
  normalise(g, workspace.x.data(), rows * cols, config.eps, name);
  if (config.variant == NsVariant::direct) {
    ns_direct(s, config, workspace, out);
  } else {
    ns_gram(s, config, workspace, out);
  }
}

}  // namespace dmuon::kernels::host
