#pragma once
// Element-type conversion between fp32, bf16 and fp16 on the host: the engine's --comm-dtype
// puts bf16/fp16 weights and gradients on the wire while the masters stay fp32, and the MPI
// backend's bf16/fp16 reduction ops use the scalar helpers. No Kokkos types here.
//
// Narrowing rounds to nearest, ties to even, bit for bit as CUDA's __float2bfloat16_rn and
// __float2half_rn for every non-NaN input: overflow goes to ±Inf as IEEE 754 says (a value
// at or beyond the midpoint between the largest finite value and the next power of two),
// fp16 results below 2⁻¹⁴ are correctly rounded subnormals, signed zeros keep their sign.
// ±Inf stays ±Inf. NaN stays a (quiet) NaN with its sign and the payload bits that fit; CUDA
// instead returns the canonical 0x7FFF, so compare NaN results by class, not by bits.
// Widening (bf16/fp16 → fp32) is exact, NaN payloads included.

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/dtype.hpp"

namespace dmuon::kernels::host {

namespace detail {
/// All ones when c holds, else zero: selects by masks keep loops free of branches (a `?:`
/// around floating-point arithmetic stays a branch under -ftrapping-math, blocking SIMD).
inline std::uint32_t mask_if(bool c) {
  return 0u - static_cast<std::uint32_t>(c);
}
inline std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float bits_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
}  // namespace detail

/// fp32 → bf16 bits, round to nearest even.
inline std::uint16_t float_to_bf16(float f) {
  const std::uint32_t u = detail::float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<std::uint16_t>((u >> 16) | 0x0040u);  // NaN: keep sign, force quiet
  }
  // Adding 0x7fff plus the lowest kept bit rounds to nearest even; a carry out of the
  // mantissa bumps the exponent, up to Inf for the largest binades.
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/// bf16 bits → fp32 (exact).
inline float bf16_to_float(std::uint16_t h) {
  return detail::bits_float(static_cast<std::uint32_t>(h) << 16);
}

/// fp32 → fp16 (IEEE binary16) bits, round to nearest even, subnormals included.
/// Branch-free (every path computed, one selected) so that loops over it vectorise.
inline std::uint16_t float_to_f16(float f) {
  const std::uint32_t u = detail::float_bits(f);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t a = u & 0x7fffffffu;
  // Normal result (|f| >= 2⁻¹⁴): rebias the exponent (127 → 15) and round away 13 bits, to
  // nearest even: add 0xfff plus the lowest kept bit. A carry moves to the next binade; from
  // 65520 (the midpoint between 65504 and 2¹⁶, a tie that rounds to even) it reaches Inf.
  const std::uint32_t normal = (a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13;
  // Subnormal result (|f| < 2⁻¹⁴): adding 0.5 puts the units of 2⁻²⁴ (the fp16 subnormal
  // step) in the last mantissa bits of the sum, so the FPU's own round-to-nearest-even
  // (the default mode, which nothing here changes) does the rounding; 1024 means 2⁻¹⁴.
  const std::uint32_t subnormal = detail::float_bits(detail::bits_float(a) + 0.5f) - 0x3f000000u;
  // Inf, or NaN kept quiet with its top payload bits.
  const std::uint32_t special =
      0x7c00u | (detail::mask_if(a > 0x7f800000u) & (0x0200u | ((a >> 13) & 0x03ffu)));
  const std::uint32_t is_special = detail::mask_if(a >= 0x477ff000u);
  const std::uint32_t is_subnormal = detail::mask_if(a < 0x38800000u);
  const std::uint32_t h = (is_special & special) | (~is_special & is_subnormal & subnormal) |
                          (~is_special & ~is_subnormal & normal);
  return static_cast<std::uint16_t>(sign | h);
}

/// fp16 bits → fp32 (exact). Branch-free, like float_to_f16.
inline float f16_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t bits = static_cast<std::uint32_t>(h & 0x7fffu) << 13;  // exponent, mantissa
  const std::uint32_t exponent = bits & 0x0f800000u;
  // Normal: rebias the exponent (15 → 127). Inf/NaN: all exponent bits set (payload kept).
  const std::uint32_t normal = bits + 0x38000000u;
  const std::uint32_t special = bits + 0x70000000u;
  // Zero or subnormal m·2⁻²⁴: as a normal with exponent 2⁻¹⁴ it reads 2⁻¹⁴ + m·2⁻²⁴;
  // subtracting 2⁻¹⁴ is exact and leaves m·2⁻²⁴ (+0 for m = 0).
  const std::uint32_t subnormal =
      detail::float_bits(detail::bits_float(bits + 0x38800000u) - detail::bits_float(0x38800000u));
  const std::uint32_t is_special = detail::mask_if(exponent == 0x0f800000u);
  const std::uint32_t is_subnormal = detail::mask_if(exponent == 0u);
  const std::uint32_t r =
      (is_special & special) | (is_subnormal & subnormal) | (~is_special & ~is_subnormal & normal);
  return detail::bits_float(sign | r);
}

/// dst[i] = src[i] converted from src_type to dst_type, i < n; any pair of {f32, bf16, f16}.
/// Same type: a copy. Widening is exact; narrowing rounds as above (a bf16 ↔ fp16 conversion
/// goes through fp32 exactly, so it rounds once). src and dst must not overlap unless they
/// are the same buffer of the same type. Runs on the host execution space and does not fence:
/// call host::fence() before dst goes to MPI. Throws KernelError for null with n > 0 or when
/// Kokkos is not initialised.
void convert(const void* src, Dtype src_type, void* dst, Dtype dst_type, std::size_t n);

}  // namespace dmuon::kernels::host
