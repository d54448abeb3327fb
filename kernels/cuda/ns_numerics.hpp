#pragma once
// Which arithmetic a CUDA Newton–Schulz call runs for its shape, storage type and requested
// form: the rule of docs/KERNELS.md ("Newton–Schulz numerics"), in one pure C++ function that
// the kernels (newton_schulz.cu), their CPU emulation (standalone/ns_emulation.hpp) and its CI
// test (tests/kernels/ns_emulation_test.cpp) share.

#include <algorithm>
#include <cstddef>

#include "kernels/dtype.hpp"
#include "kernels/ns_coefficients.hpp"

namespace dmuon::kernels::cuda {

/// The form one call runs, the type of its iterated X̃ and the type of its m×m matrices (R̃,
/// P, Q and their products; the direct form's A and B). Every GEMM accumulates in fp32; each
/// result is rounded to its destination's type.
struct NsNumerics {
  NsVariant form = NsVariant::gram;
  Dtype x = Dtype::f32;
  Dtype gram = Dtype::f32;
};

inline bool operator==(const NsNumerics& a, const NsNumerics& b) {
  return a.form == b.form && a.x == b.x && a.gram == b.gram;
}
inline bool operator!=(const NsNumerics& a, const NsNumerics& b) {
  return !(a == b);
}

/// n/m from which the Gram form pays on 16-bit storage. Its m×m matrices must be fp32 there
/// (16-bit R = X Xᵀ loses every singular value below ~sqrt(u)·σ_max: 7–12 % error on a
/// gradient averaged over as many samples as it has columns), and fp32 products run without
/// tensor cores, ρ ≈ 15x slower per FLOP on an H100/H200 (989 vs 67 TFLOP/s dense). Five
/// steps cost 6.5m²n 16-bit + 17.5m³ fp32 FLOPs in the Gram form against 20m²n + 10m³ 16-bit
/// in the direct form: the Gram form is cheaper once n/m > (17.5ρ − 10)/13.5 ≈ 18.7.
inline constexpr std::size_t kGramMinAspect = 19;

/// The rule:
///  * fp32 storage: the requested form, in fp32;
///  * 16-bit storage, direct requested: the direct form in the storage type (the reference
///    Muon's arithmetic);
///  * 16-bit storage, Gram requested: where n >= kGramMinAspect·m the Gram form with fp32 m×m
///    matrices and X̃ in fp16 (fp16 carries 8x bf16's precision at the same tensor-core speed,
///    and the range scales of ns_plan.hpp keep it in range); elsewhere the direct form in the
///    storage type, which is then both cheaper and as accurate.
inline NsNumerics ns_numerics(std::size_t rows, std::size_t cols, Dtype storage,
                              NsVariant requested) {
  if (storage == Dtype::f32) return {requested, Dtype::f32, Dtype::f32};
  const std::size_t m = std::min(rows, cols), n = std::max(rows, cols);
  if (requested == NsVariant::gram && n >= kGramMinAspect * m)
    return {NsVariant::gram, Dtype::f16, Dtype::f32};
  return {NsVariant::direct, storage, storage};
}

}  // namespace dmuon::kernels::cuda
