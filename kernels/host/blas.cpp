// BLAS entry points of the host kernels: every product goes through KokkosBlas::gemm, except
// SYRK, which KokkosKernels 3.4 lacks and OpenBLAS provides (half the FLOPs of the GEMM).
#include <cblas.h>
#include <KokkosBlas3_gemm.hpp>

#include <cmath>

#include "kernels/host/views.hpp"
#include "kernels/linear.hpp"
#include "kernels/newton_schulz.hpp"
#include "kernels/scoped_kokkos.hpp"

namespace dmuon::kernels::host::detail {

void gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, float alpha,
          const float* a, const float* b, float beta, float* c) {
  ConstMat av(a, ta ? k : m, ta ? m : k);
  ConstMat bv(b, tb ? n : k, tb ? k : n);
  Mat cv(c, m, n);
  KokkosBlas::gemm(ta ? "T" : "N", tb ? "T" : "N", alpha, av, bv, beta, cv);
}

void syrk_full(bool trans, std::size_t n, std::size_t k, float alpha, const float* a, float* c) {
  const int ni = static_cast<int>(n), ki = static_cast<int>(k);
  cblas_ssyrk(CblasRowMajor, CblasUpper, trans ? CblasTrans : CblasNoTrans, ni, ki, alpha, a,
              trans ? ni : ki, 0.0f, c, ni);
  Mat cv(c, n, n);
  // Mirror the upper triangle into the lower one, row by row.
  Kokkos::parallel_for(
      "dmuon::syrk_mirror", range(n), KOKKOS_LAMBDA(const std::size_t i) {
        for (std::size_t j = 0; j < i; ++j) cv(i, j) = cv(j, i);
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
  detail::ConstVec xv(x, n);
  std::size_t bad = 0;
  Kokkos::parallel_reduce(
      "dmuon::count_non_finite", detail::range(n),
      KOKKOS_LAMBDA(const std::size_t i, std::size_t& acc) {
        if (!std::isfinite(xv(i))) ++acc;
      },
      bad);
  return bad;
}

void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha,
          const float* a, const float* b, float beta, float* c) {
  require_kokkos("gemm");
  detail::gemm(trans_a, trans_b, m, n, k, alpha, a, b, beta, c);
}

}  // namespace dmuon::kernels::host
