#pragma once
// Element types a collective moves. Two-byte types exist so that counting and NCCL see the
// real message sizes of bf16/fp16 training; the MPI backend only moves them (no reductions).

#include <cstddef>

namespace dmuon::comm {

enum class DType { f32, f64, bf16, f16 };

/// Bytes per element.
constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::bf16: return 2;
    case DType::f16: return 2;
  }
  return 0;
}

/// Lower-case name for messages ("f32", "bf16", ...).
constexpr const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
  }
  return "?";
}

}  // namespace dmuon::comm
