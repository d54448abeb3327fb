// BLAS entry points of the host kernels: every product goes through KokkosBlas::gemm, except
// SYRK, which KokkosKernels 3.4 lacks and OpenBLAS provides (half the FLOPs of the GEMM).
// Both may end in a host BLAS call that reads memory directly, outside the execution space's
// ordering, so each fences the host space first (free on Serial, a no-op wait on OpenMP).
#include <cblas.h>
#include <KokkosBlas3_gemm.hpp>

#include <cmath>

#include "kernels/host/views.hpp"
#include "kernels/linear.hpp"
#include "kernels/newton_schulz.hpp"
#include "kernels/scoped_kokkos.hpp"

namespace dmuon::kernels::host::detail {

void gemm(const char* mode_a, const char* mode_b, float alpha, const ConstMat& a, const ConstMat& b,
          float beta, const Mat& c) {
  fence_host();
  KokkosBlas::gemm(mode_a, mode_b, alpha, a, b, beta, c);
}

void gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, float alpha,
          const float* a, const float* b, float beta, float* c) {
  gemm(ta ? "T" : "N", tb ? "T" : "N", alpha, ConstMat(a, ta ? k : m, ta ? m : k),
       ConstMat(b, tb ? n : k, tb ? k : n), beta, Mat(c, m, n));
}

void syrk_full(bool trans, float alpha, const ConstMat& a, const Mat& c) {
  const std::size_t n = c.extent(0);
  const std::size_t k = trans ? a.extent(0) : a.extent(1);
  if (c.extent(1) != n || (trans ? a.extent(1) : a.extent(0)) != n) {
    throw KernelError("syrk: operand shapes do not match (internal error)");
  }
  fence_host();
  cblas_ssyrk(CblasRowMajor, CblasUpper, trans ? CblasTrans : CblasNoTrans, static_cast<int>(n),
              static_cast<int>(k), alpha, a.data(), static_cast<int>(a.stride(0)), 0.0f, c.data(),
              static_cast<int>(c.stride(0)));
  // Mirror the upper triangle into the lower one (each (i, j) with j < i reads only the
  // upper triangle, which nobody writes: race-free).
  Kokkos::parallel_for(
      "dmuon::syrk_mirror", range2d(n, n), KOKKOS_LAMBDA(const std::size_t i, const std::size_t j) {
        if (j < i) c(i, j) = c(j, i);
      });
}

void check_finite(const float* x, std::size_t n, const char* kernel, std::string_view what,
                  std::string_view name) {
  const std::size_t bad = count_non_finite(x, n);
  if (bad != 0) {
    throw KernelError(std::string(kernel) + ": " + std::string(what) + " of parameter " +
                      quoted(name) + " has " + std::to_string(bad) + " non-finite value(s) of " +
                      std::to_string(n));
  }
}

}  // namespace dmuon::kernels::host::detail

namespace dmuon::kernels::host {

std::size_t count_non_finite(const float* x, std::size_t n) {
  require_kokkos("count_non_finite");
  detail::require_data(x, n, "count_non_finite", "input");
  const detail::ConstVec xv(x, n);
  return detail::counting_reduce(
      "dmuon::count_non_finite", n, KOKKOS_LAMBDA(const std::size_t i, std::uint32_t& bad) {
        bad += std::isfinite(xv(i)) ? 0 : 1;
      });
}

void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha,
          const float* a, const float* b, float beta, float* c) {
  require_kokkos("gemm");
  detail::gemm(trans_a, trans_b, m, n, k, alpha, a, b, beta, c);
}

}  // namespace dmuon::kernels::host
