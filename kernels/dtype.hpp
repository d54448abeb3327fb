#pragma once
// Element types of the buffers kernels read and write: fp32 masters and optimizer state,
// bf16/fp16 for what travels on the wire (--comm-dtype) and for Newton–Schulz iterations on the
// device (--ns-dtype). Shared by the host and CUDA kernel APIs so the engine names one type.

#include <cstddef>
#include <string_view>

namespace dmuon::kernels {

enum class Dtype { f32, bf16, f16 };

/// Bytes per element.
constexpr std::size_t dtype_bytes(Dtype t) {
  return t == Dtype::f32 ? 4 : 2;
}

/// "f32" | "bf16" | "f16".
constexpr std::string_view dtype_name(Dtype t) {
  return t == Dtype::f32 ? "f32" : (t == Dtype::bf16 ? "bf16" : "f16");
}

}  // namespace dmuon::kernels
