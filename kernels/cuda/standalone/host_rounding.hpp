#pragma once
// Bit-level round-to-nearest-even of fp32 values to bf16 and fp16 on the host, independent of
// compiler support for those types: the oracle of dmuon_cuda_check's conversion checks and the
// rounding of dmuon_ns_emulate. Both functions were checked exhaustively over all 2^32 floats
// (fp16 against GCC's _Float16 conversion, bf16 against a value-level rounding in double).

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace dmuon::kernels::cuda::host_rounding {

inline std::uint32_t f2u(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float u2f(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline std::uint16_t bf16_bits(float f) {
  const std::uint32_t u = f2u(f);
  if (std::isnan(f)) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  // Adding 0x7FFF plus the lowest kept bit rounds to nearest even, overflowing to Inf.
  return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
inline float bf16_value(std::uint16_t b) {
  return u2f(static_cast<std::uint32_t>(b) << 16);
}
inline double f16_value(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t e = (h >> 10) & 31u, f = h & 1023u;
  if (e == 0)  // subnormal: f x 2^-24, exact in float
    return static_cast<double>(u2f(sign | f2u(static_cast<float>(f) * 0x1p-24f)));
  if (e == 31) return u2f(sign | 0x7F800000u | (f ? 0x400000u : 0u));  // Inf, or a quiet NaN
  return u2f(sign | ((e + 112u) << 23) | (f << 13));  // rebias 15 -> 127, widen the mantissa
}
// Round to nearest even on the bits (no libm: the emulator rounds every product and sum).
// Normal halves (|x| >= 2^-14): rebias the exponent and drop 13 mantissa bits, adding 0xFFF plus
// the lowest kept bit; a carry moves into the exponent, as it should. Subnormal halves: the
// quantum is 2^-24, so |x| x 2^24 (< 1024, exact) is rounded to an integer by adding 2^23 in
// float arithmetic (round-to-nearest-even). 65520 (the tie above 65504) and beyond become Inf.
// Checked exhaustively (see the header comment).
inline std::uint16_t f16_bits(float x) {
  const std::uint32_t u = f2u(x);
  const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0x7E00;          // NaN
  if (a >= 0x477FF000u) return sign | 0x7C00;  // >= 65520: Inf
  if (a >= 0x38800000u) {                      // >= 2^-14: a normal half
    const std::uint32_t h = a - 0x38000000u;   // exponent bias 127 -> 15
    return sign | static_cast<std::uint16_t>((h + 0xFFFu + ((h >> 13) & 1u)) >> 13);
  }
  const float scaled = u2f(a) * 0x1p24f + 0x1p23f;  // the integer nearest |x| x 2^24, even ties
  return sign | static_cast<std::uint16_t>(f2u(scaled) - f2u(0x1p23f));
}

/// The value of x rounded to bf16 / fp16, as a float (every finite value of both is a float).
inline float round_bf16(float x) {
  return bf16_value(bf16_bits(x));
}
inline float round_f16(float x) {
  return static_cast<float>(f16_value(f16_bits(x)));
}

}  // namespace dmuon::kernels::cuda::host_rounding
