#pragma once
// Private to kernels/host: unmanaged Kokkos views over caller pointers and the BLAS helpers.

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <string>
#include <string_view>

#include "kernels/kernel_error.hpp"

namespace dmuon::kernels::host::detail {

using ExecSpace = Kokkos::DefaultHostExecutionSpace;
using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
using Mat = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Unmanaged>;
using ConstMat = Kokkos::View<const float**, Kokkos::LayoutRight, Kokkos::HostSpace, Unmanaged>;
using Vec = Kokkos::View<float*, Kokkos::HostSpace, Unmanaged>;
using ConstVec = Kokkos::View<const float*, Kokkos::HostSpace, Unmanaged>;

inline Kokkos::RangePolicy<ExecSpace> range(std::size_t n) {
  return Kokkos::RangePolicy<ExecSpace>(0, n);
}

/// c (m×n) = alpha · op(a) · op(b) + beta · c through KokkosBlas::gemm (row-major views).
void gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, float alpha,
          const float* a, const float* b, float beta, float* c);

/// c (n×n, full) = alpha · op(a) · op(a)ᵀ via cblas_ssyrk on the upper triangle, then mirrored.
/// op(a) is n×k; trans means a is stored k×n and op(a) = aᵀ.
void syrk_full(bool trans, std::size_t n, std::size_t k, float alpha, const float* a, float* c);

/// Throws KernelError("<kernel>: <what> '<name>' ...") when x holds NaN/Inf.
void check_finite(const float* x, std::size_t n, const char* kernel, std::string_view what,
                  std::string_view name);

inline std::string quoted(std::string_view name) {
  return "'" + std::string(name.empty() ? std::string_view("<unnamed>") : name) + "'";
}

}  // namespace dmuon::kernels::host::detail
