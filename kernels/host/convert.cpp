#include "kernels/convert.hpp"

#include <cstdint>
#include <string>

#include "kernels/host/views.hpp"
#include "kernels/kernel_error.hpp"
#include "kernels/scoped_kokkos.hpp"

namespace dmuon::kernels::host {

namespace {

using Bits = std::uint16_t;  // bf16 and fp16 travel as their bit patterns

// dst(i) = op(src(i)) over [0, n) on the host execution space.
template <class Src, class Dst, class Op>
void convert_with(const char* label, const void* src, void* dst, std::size_t n, Op op) {
  const Kokkos::View<const Src*, detail::MemSpace, detail::Unmanaged> s(
      static_cast<const Src*>(src), n);
  const Kokkos::View<Dst*, detail::MemSpace, detail::Unmanaged> d(static_cast<Dst*>(dst), n);
  Kokkos::parallel_for(
      label, detail::range(n), KOKKOS_LAMBDA(const std::size_t i) { d(i) = op(s(i)); });
}

struct Identity {
  template <class T>
  KOKKOS_INLINE_FUNCTION T operator()(T x) const {
    return x;
  }
};
struct F32ToBf16 {
  KOKKOS_INLINE_FUNCTION Bits operator()(float x) const { return float_to_bf16(x); }
};
struct F32ToF16 {
  KOKKOS_INLINE_FUNCTION Bits operator()(float x) const { return float_to_f16(x); }
};
struct Bf16ToF32 {
  KOKKOS_INLINE_FUNCTION float operator()(Bits x) const { return bf16_to_float(x); }
};
struct F16ToF32 {
  KOKKOS_INLINE_FUNCTION float operator()(Bits x) const { return f16_to_float(x); }
};
// Through fp32, which holds every bf16 and fp16 value exactly: one rounding.
struct Bf16ToF16 {
  KOKKOS_INLINE_FUNCTION Bits operator()(Bits x) const { return float_to_f16(bf16_to_float(x)); }
};
struct F16ToBf16 {
  KOKKOS_INLINE_FUNCTION Bits operator()(Bits x) const { return float_to_bf16(f16_to_float(x)); }
};

}  // namespace

void convert(const void* src, Dtype src_type, void* dst, Dtype dst_type, std::size_t n) {
  require_kokkos("convert");
  detail::require_data(src, n, "convert", "source");
  detail::require_data(dst, n, "convert", "destination");
  for (const Dtype t : {src_type, dst_type}) {
    if (t != Dtype::f32 && t != Dtype::bf16 && t != Dtype::f16) {
      throw KernelError("convert: unknown element type " + std::to_string(static_cast<int>(t)));
    }
  }
  if (src_type == dst_type) {
    if (src == dst) return;
    if (src_type == Dtype::f32) {
      convert_with<float, float>("dmuon::convert_copy", src, dst, n, Identity{});
    } else {
      convert_with<Bits, Bits>("dmuon::convert_copy", src, dst, n, Identity{});
    }
    return;
  }
  switch (src_type) {
    case Dtype::f32:
      if (dst_type == Dtype::bf16) {
        convert_with<float, Bits>("dmuon::convert_f32_bf16", src, dst, n, F32ToBf16{});
      } else {
        convert_with<float, Bits>("dmuon::convert_f32_f16", src, dst, n, F32ToF16{});
      }
      return;
    case Dtype::bf16:
      if (dst_type == Dtype::f32) {
        convert_with<Bits, float>("dmuon::convert_bf16_f32", src, dst, n, Bf16ToF32{});
      } else {
        convert_with<Bits, Bits>("dmuon::convert_bf16_f16", src, dst, n, Bf16ToF16{});
      }
      return;
    case Dtype::f16:
      if (dst_type == Dtype::f32) {
        convert_with<Bits, float>("dmuon::convert_f16_f32", src, dst, n, F16ToF32{});
      } else {
        convert_with<Bits, Bits>("dmuon::convert_f16_bf16", src, dst, n, F16ToBf16{});
      }
      return;
  }
}

}  // namespace dmuon::kernels::host
