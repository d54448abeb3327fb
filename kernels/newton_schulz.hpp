#pragma once
// Newton–Schulz orthogonalisation (SPEC §7) on the host: O ≈ U Vᵀ for G = U Σ Vᵀ.
// Pointer-based, float32, row-major; no Kokkos types here so the engine and .cu files need none.

#include <cstddef>
#include <string_view>
#include <vector>

#include "kernels/ns_coefficients.hpp"

namespace dmuon::kernels::host {

/// Scratch for one matrix shape, sized once so the optimizer hot loop never allocates.
/// Reuse it for every call with the same (rows, cols); other shapes throw KernelError.
class NsWorkspace {
 public:
  NsWorkspace(std::size_t rows, std::size_t cols);
  std::size_t rows() const { return rows_; }
  std::size_t cols() const { return cols_; }
  std::size_t bytes() const;

  // Buffers (public to the kernels, opaque to callers): x/xn are rows*cols, a/b/q/t/u are m*m
  // with m = min(rows, cols); muon_in/muon_out are rows*cols scratch for muon_step.
  std::vector<float> x, xn, a, b, q, t, u, muon_in, muon_out;

 private:
  std::size_t rows_;
  std::size_t cols_;
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
