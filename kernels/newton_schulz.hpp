#pragma once
// Newton–Schulz orthogonalisation (SPEC §7) on the host: O ≈ U Vᵀ for G = U Σ Vᵀ.
// Pointer-based, float32, row-major; no Kokkos types here so the engine and .cu files need none.

#include <cstddef>
#include <memory>
#include <string_view>

#include "kernels/ns_coefficients.hpp"

namespace dmuon::kernels::host {

/// Scratch for one matrix shape, sized once so the optimizer hot loop never allocates.
/// Reuse it for every call with the same (rows, cols); other shapes throw KernelError.
/// The buffers are Kokkos views owned through an opaque pointer (this header stays free of
/// Kokkos types): construct it after Kokkos is initialised (else KernelError) and destroy it
/// before Kokkos is finalised, i.e. inside the lifetime of a ScopedKokkos. Movable (a
/// moved-from workspace is 0x0 and every kernel rejects it), not copyable.
class NsWorkspace {
 public:
  NsWorkspace(std::size_t rows, std::size_t cols);
  ~NsWorkspace();
  NsWorkspace(NsWorkspace&&) noexcept;
  NsWorkspace& operator=(NsWorkspace&&) noexcept;
  NsWorkspace(const NsWorkspace&) = delete;
  NsWorkspace& operator=(const NsWorkspace&) = delete;

  std::size_t rows() const { return rows_; }
  std::size_t cols() const { return cols_; }
  /// Bytes of scratch held: 4 rows×cols and 5 m×m fp32 buffers, m = min(rows, cols).
  std::size_t bytes() const;

  /// The buffers, defined in kernels/host (opaque to callers).
  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::size_t rows_;
  std::size_t cols_;
  std::unique_ptr<Impl> impl_;
};

/// out = NS(g) for a rows×cols row-major matrix. Normalises by ‖g‖_F + eps (sum of squares
/// accumulated in double, applied in fp32). A tall matrix (rows > cols) iterates on its wide
/// transpose; the transpose is folded into the GEMM transposition flags instead of copied,
/// which is the same arithmetic as transpose → iterate → transpose back.
/// `out` may alias `g`. Throws KernelError naming `name` if g holds NaN/Inf or the workspace
/// shape differs.
void newton_schulz(const float* g, float* out, std::size_t rows, std::size_t cols,
                   const NsConfig& config, NsWorkspace& workspace, std::string_view name = "");

/// Counts non-finite values (NaN, ±Inf) in x[0..n).
std::size_t count_non_finite(const float* x, std::size_t n);

}  // namespace dmuon::kernels::host
