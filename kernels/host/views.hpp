#pragma once
// Private to kernels/host: the execution space and policies every host kernel uses, unmanaged
// Kokkos views over caller pointers, managed views for kernel-owned scratch, and the BLAS
// helpers.
//
// The host kernels run on Kokkos::DefaultHostExecutionSpace (Serial, OpenMP or Threads) over
// HostSpace memory only; a site's CUDA-enabled Kokkos leaves them on the host. Their lambdas
// may therefore call std:: math (std::isfinite, std::sqrt), which also keeps one spelling for
// Kokkos 3.4 (Kokkos::Experimental::) and 4.x (Kokkos::).
//
// Synchronisation: parallel_for may return before the kernel has finished (Kokkos semantics;
// the Serial and OpenMP backends happen to block). parallel_reduce into a host scalar does not:
// the result is final when it returns. Kernels fence only before their own host code (BLAS
// calls) reads memory a kernel wrote; callers fence (host::fence) before other consumers.

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "kernels/kernel_error.hpp"

namespace dmuon::kernels::host::detail {

using ExecSpace = Kokkos::DefaultHostExecutionSpace;
using MemSpace = Kokkos::HostSpace;
using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;

// Caller-owned data (pointers from the public API), row-major.
using Mat = Kokkos::View<float**, Kokkos::LayoutRight, MemSpace, Unmanaged>;
using ConstMat = Kokkos::View<const float**, Kokkos::LayoutRight, MemSpace, Unmanaged>;
using Vec = Kokkos::View<float*, MemSpace, Unmanaged>;
using ConstVec = Kokkos::View<const float*, MemSpace, Unmanaged>;

// Kernel-owned scratch (labelled, reference-counted, freed with its owner).
using OwnedMat = Kokkos::View<float**, Kokkos::LayoutRight, MemSpace>;

/// 1-D index range [0, n) on the host execution space (index type: its size_type, size_t).
using Range = Kokkos::RangePolicy<ExecSpace>;
/// 2-D (i, j) range over a row-major matrix: j runs fastest, matching LayoutRight.
using Range2D =
    Kokkos::MDRangePolicy<ExecSpace,
                          Kokkos::Rank<2, Kokkos::Iterate::Right, Kokkos::Iterate::Right>>;

inline Range range(std::size_t n) {
  return Range(0, n);
}

inline Range2D range2d(std::size_t rows, std::size_t cols) {
  return Range2D({0, 0}, {rows, cols});
}

/// parallel_reduce over [0, n) for kernels that count (non-finite values) while they compute:
/// `f(i, count)` adds to a 32-bit counter. Returns the total; complete on return (a reduction
/// into a host scalar). A 32-bit counter stays in the float data's SIMD lanes (a 64-bit one
/// needs widening shuffles per vector: about 10% slower on the memory-bound kernels), so the
/// range runs in pieces of at most 2³² − 1 elements and no counter can overflow.
template <class Functor>
std::size_t counting_reduce(const std::string& label, std::size_t n, const Functor& f) {
  constexpr std::size_t kPiece = std::numeric_limits<std::uint32_t>::max();
  std::size_t total = 0;
  for (std::size_t begin = 0; begin < n;) {
    const std::size_t end = begin + std::min(kPiece, n - begin);
    std::uint32_t count = 0;
    Kokkos::parallel_reduce(label, Range(begin, end), f, count);
    total += count;
    begin = end;
  }
  return total;
}

/// Waits for the host execution space: before host code (a BLAS call) reads what a
/// parallel_for wrote.
inline void fence_host() {
#if KOKKOS_VERSION >= 40000
  ExecSpace().fence("dmuon::kernels::host::fence_before_blas");
#else
  ExecSpace().fence();  // Kokkos 3.4 fences take no label
#endif
}

/// c = alpha · op(a) · op(b) + beta · c through KokkosBlas::gemm; "N" or "T" per operand.
/// Extents must agree with the modes (KokkosBlas checks them).
void gemm(const char* mode_a, const char* mode_b, float alpha, const ConstMat& a, const ConstMat& b,
          float beta, const Mat& c);

/// Pointer form of gemm: c (m×n) = alpha · op(a) · op(b) + beta · c, row-major.
void gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, float alpha,
          const float* a, const float* b, float beta, float* c);

/// c (n×n, full) = alpha · op(a) · op(a)ᵀ via cblas_ssyrk on the upper triangle, then mirrored.
/// op(a) is n×k: a itself (n×k) when !trans, aᵀ of a stored k×n when trans.
void syrk_full(bool trans, float alpha, const ConstMat& a, const Mat& c);

/// Throws KernelError("<kernel>: <what> '<name>' ...") when x holds NaN/Inf.
void check_finite(const float* x, std::size_t n, const char* kernel, std::string_view what,
                  std::string_view name);

inline std::string quoted(std::string_view name) {
  return "'" + std::string(name.empty() ? std::string_view("<unnamed>") : name) + "'";
}

/// Throws KernelError when a pointer is null while n > 0 (an empty range may be null).
inline void require_data(const void* p, std::size_t n, const char* kernel, const char* what) {
  if (p == nullptr && n != 0) {
    throw KernelError(std::string(kernel) + ": " + what + " is null with " + std::to_string(n) +
                      " elements");
  }
}

}  // namespace dmuon::kernels::host::detail
