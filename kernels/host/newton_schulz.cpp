#include "kernels/newton_schulz.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "kernels/host/views.hpp"
#include "kernels/host/workspace.hpp"
#include "kernels/kernel_error.hpp"
#include "kernels/scoped_kokkos.hpp"

namespace dmuon::kernels::host {

using detail::ConstMat;
using detail::Mat;

NsWorkspace::Impl::Impl(std::size_t rows, std::size_t cols)
    : x("dmuon::NsWorkspace::x", rows, cols),
      xn("dmuon::NsWorkspace::xn", rows, cols),
      a("dmuon::NsWorkspace::a", std::min(rows, cols), std::min(rows, cols)),
      b("dmuon::NsWorkspace::b", std::min(rows, cols), std::min(rows, cols)),
      q("dmuon::NsWorkspace::q", std::min(rows, cols), std::min(rows, cols)),
      t("dmuon::NsWorkspace::t", std::min(rows, cols), std::min(rows, cols)),
      u("dmuon::NsWorkspace::u", std::min(rows, cols), std::min(rows, cols)),
      muon_in("dmuon::NsWorkspace::muon_in", rows, cols),
      muon_out("dmuon::NsWorkspace::muon_out", rows, cols) {}

NsWorkspace::NsWorkspace(std::size_t rows, std::size_t cols) : rows_(rows), cols_(cols) {
  require_kokkos("NsWorkspace");
  if (rows == 0 || cols == 0) {
    throw KernelError("NsWorkspace: shape must be positive, got " + std::to_string(rows) + "x" +
                      std::to_string(cols));
  }
  impl_ = std::make_unique<Impl>(rows, cols);
}

NsWorkspace::~NsWorkspace() = default;
// A moved-from workspace reports 0x0, so every kernel rejects it by its shape check.
NsWorkspace::NsWorkspace(NsWorkspace&& other) noexcept
    : rows_(std::exchange(other.rows_, 0)),
      cols_(std::exchange(other.cols_, 0)),
      impl_(std::move(other.impl_)) {}

NsWorkspace& NsWorkspace::operator=(NsWorkspace&& other) noexcept {
  rows_ = std::exchange(other.rows_, 0);
  cols_ = std::exchange(other.cols_, 0);
  impl_ = std::move(other.impl_);
  return *this;
}

std::size_t NsWorkspace::bytes() const {
  if (!impl_) return 0;  // moved from
  std::size_t floats = 0;
  for (const detail::OwnedMat* v : {&impl_->x, &impl_->xn, &impl_->a, &impl_->b, &impl_->q,
                                    &impl_->t, &impl_->u, &impl_->muon_in, &impl_->muon_out}) {
    floats += v->size();
  }
  return sizeof(float) * floats;
}

namespace {

// The matrix being iterated is always the wide one, X (m×n, m <= n). It is stored in the
// caller's orientation: row-major X itself when !trans, row-major Xᵀ (n×m) when trans, so the
// transposition lives in the GEMM modes and no transpose copy is made.
struct Shape {
  std::size_t m, n;
  bool trans;
};

// a = X Xᵀ (m×m) with a plain GEMM (direct form: the reference arithmetic).
void gram_gemm(const Shape& s, const ConstMat& x, const Mat& a) {
  detail::gemm(s.trans ? "T" : "N", s.trans ? "N" : "T", 1.0f, x, x, 0.0f, a);
}

// out = P X (P m×m) in the stored orientation: when trans, Xᵀ is stored and out = Xᵀ Pᵀ.
void apply_left(const Shape& s, const ConstMat& p, const ConstMat& x, const Mat& out) {
  if (!s.trans) {
    detail::gemm("N", "N", 1.0f, p, x, 0.0f, out);
  } else {
    detail::gemm("N", "T", 1.0f, x, p, 0.0f, out);
  }
}

// b = a·I + bc·A (the caller's GEMM then adds cc·A·A); A m×m.
void poly_init(const ConstMat& a_in, const Mat& b_out, float a, float b) {
  Kokkos::parallel_for(
      "dmuon::ns_poly", detail::range2d(a_in.extent(0), a_in.extent(1)),
      KOKKOS_LAMBDA(const std::size_t i, const std::size_t j) {
        b_out(i, j) = b * a_in(i, j) + (i == j ? a : 0.0f);
      });
}

// p = a·I + b·R + c·R2 (all m×m, elementwise).
void poly_combine(const ConstMat& r, const ConstMat& r2, const Mat& p, float a, float b, float c) {
  Kokkos::parallel_for(
      "dmuon::ns_gram_poly", detail::range2d(r.extent(0), r.extent(1)),
      KOKKOS_LAMBDA(const std::size_t i, const std::size_t j) {
        p(i, j) = b * r(i, j) + c * r2(i, j) + (i == j ? a : 0.0f);
      });
}

// r = (r + rᵀ) / 2: products of commuting symmetric matrices are symmetric only up to
// rounding; SYRK of r next step assumes r = rᵀ, so remove the drift. Iteration (i, j) with
// j > i owns the pair {(i, j), (j, i)}: race-free.
void symmetrize(const Mat& r) {
  Kokkos::parallel_for(
      "dmuon::ns_symmetrize", detail::range2d(r.extent(0), r.extent(1)),
      KOKKOS_LAMBDA(const std::size_t i, const std::size_t j) {
        if (j > i) {
          const float v = 0.5f * (r(i, j) + r(j, i));
          r(i, j) = v;
          r(j, i) = v;
        }
      });
}

// x = g / (‖g‖_F + eps); throws naming the parameter if g is not finite.
void normalise(const float* g, const Mat& x, float eps, std::string_view name) {
  const std::size_t count = x.size();
  const detail::ConstVec gv(g, count);
  const detail::Vec xv(x.data(), count);  // x is contiguous: view it flat
  double sumsq = 0.0;
  // Accumulate in double: exact enough for any fp32 input, and overflow-free, so a non-finite
  // sum means a non-finite input (the check costs no extra pass). A reduction into a host
  // scalar is complete on return.
  Kokkos::parallel_reduce(
      "dmuon::ns_sumsq", detail::range(count),
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
      "dmuon::ns_normalise", detail::range(count),
      KOKKOS_LAMBDA(const std::size_t i) { xv(i) = gv(i) * inv; });
}

void ns_direct(const Shape& s, const NsConfig& cfg, NsWorkspace::Impl& ws, const Mat& out) {
  Mat x = ws.x;
  Mat xn = ws.xn;
  const int steps = cfg.steps;
  for (int k = 0; k < steps; ++k) {
    const NsCoefficients co = ns_step_coefficients(cfg.coefficients, k);
    gram_gemm(s, x, ws.a);  // A = X Xᵀ
    // B = aI + bA + cA²
    poly_init(ws.a, ws.b, static_cast<float>(co.a), static_cast<float>(co.b));
    detail::gemm("N", "N", static_cast<float>(co.c), ws.a, ws.a, 1.0f, ws.b);
    apply_left(s, ws.b, x, k + 1 == steps ? out : xn);  // X <- B X
    std::swap(x, xn);
  }
}

void ns_gram(const Shape& s, const NsConfig& cfg, NsWorkspace::Impl& ws, const Mat& out) {
  Mat x = ws.x;
  Mat xn = ws.xn;
  Mat r = ws.a;  // R = X Xᵀ of the current restart's X, advanced as R <- P² R
  Mat p = ws.b;  // P = aI + bR + cR²
  Mat q = ws.q;  // Q = product of the P's since the last restart
  Mat t = ws.t;
  Mat u = ws.u;
  detail::syrk_full(s.trans, 1.0f, x, r);
  bool q_identity = true;
  const int steps = cfg.steps;
  for (int k = 0; k < steps; ++k) {
    if (k == kGramRestartStep && !q_identity) {
      // Restart (SPEC §7): fold Q into X and recompute R from it, which bounds the error that
      // the polynomial recursion in R accumulates in fp32.
      apply_left(s, q, x, xn);
      std::swap(x, xn);
      detail::syrk_full(s.trans, 1.0f, x, r);
      q_identity = true;
    }
    const NsCoefficients co = ns_step_coefficients(cfg.coefficients, k);
    detail::syrk_full(false, 1.0f, r, t);  // R² = R Rᵀ (R symmetric): SYRK, half a GEMM
    poly_combine(r, t, p, static_cast<float>(co.a), static_cast<float>(co.b),
                 static_cast<float>(co.c));
    const bool last = (k + 1 == steps);
    const bool restart_next = (k + 1 == kGramRestartStep);
    if (!last && !restart_next) {
      // R <- P R P = P² R (P is a polynomial in R, so they commute); P² by SYRK.
      detail::syrk_full(false, 1.0f, p, t);
      detail::gemm("N", "N", 1.0f, t, r, 0.0f, u);
      std::swap(r, u);
      symmetrize(r);
    }
    if (q_identity) {
      std::swap(q, p);  // Q = P
      q_identity = false;
    } else {
      detail::gemm("N", "N", 1.0f, p, q, 0.0f, t);  // Q <- P Q
      std::swap(q, t);
    }
  }
  apply_left(s, q, x, out);  // output Q X (X Qᵀ in the transposed storage)
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
  NsWorkspace::Impl& ws = workspace.impl();
  normalise(g, ws.x, config.eps, name);
  const Mat out_view(out, rows, cols);
  if (config.variant == NsVariant::direct) {
    ns_direct(s, config, ws, out_view);
  } else {
    ns_gram(s, config, ws, out_view);
  }
}

}  // namespace dmuon::kernels::host
