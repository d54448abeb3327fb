#pragma once
// Which arithmetic a CUDA Newton–Schulz call runs for its shape, storage type and requested
// form: the rule of docs/KERNELS.md ("Newton–Schulz numerics"), in one pure C++ function that
// the kernels (newton_schulz.cu), their CPU emulation (standalone/ns_emulation.hpp) and its CI
// test (tests/kernels/ns_emulation_test.cpp) share.

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

/// The rule: the direct form in the storage type; the Gram form in fp32 for fp32 storage and
/// in fp16 (X̃ and the m×m matrices) for 16-bit storage.
inline NsNumerics ns_numerics(std::size_t /*rows*/, std::size_t /*cols*/, Dtype storage,
                              NsVariant requested) {
  if (requested == NsVariant::direct || storage == Dtype::f32) return {requested, storage, storage};
  return {NsVariant::gram, Dtype::f16, Dtype::f16};
}

}  // namespace dmuon::kernels::cuda
