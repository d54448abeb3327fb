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
  const int e = (h >> 10) & 31, f = h & 1023;
  double v;
  if (e == 0) {
    v = std::ldexp(static_cast<double>(f), -24);
  } else if (e == 31) {
    v = f ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else {
    v = std::ldexp(static_cast<double>(1024 + f), e - 25);
  }
  return (h >> 15) ? -v : v;
}
// Exact in double: the quantum is 2^-24 below 2^-14, else 2^(e-10) for |x| in [2^e, 2^(e+1));
// nearbyint rounds ties to even; 65520 (the tie above 65504) and beyond become Inf. Checked
// exhaustively (see the header comment).
inline std::uint16_t f16_bits(float x) {
  if (std::isnan(x)) return 0x7E00;
  const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(x));
  if (a >= 65520.0) return sign | 0x7C00;
  int e;
  std::frexp(a, &e);
  const int q = a < std::ldexp(1.0, -14) ? -24 : (e - 1) - 10;
  const double k = std::nearbyint(std::ldexp(a, -q));
  const double r = std::ldexp(k, q);
  if (r == 0) return sign;
  if (r < std::ldexp(1.0, -14)) return sign | static_cast<std::uint16_t>(k);
  int er;
  std::frexp(r, &er);
  const int exp = er - 1;
  const auto mant = static_cast<std::uint16_t>(std::ldexp(r, 10 - exp) - 1024);
  return sign | static_cast<std::uint16_t>((exp + 15) << 10) | mant;
}

/// The value of x rounded to bf16 / fp16, as a float (every finite value of both is a float).
inline float round_bf16(float x) {
  return bf16_value(bf16_bits(x));
}
inline float round_f16(float x) {
  return static_cast<float>(f16_value(f16_bits(x)));
}

}  // namespace dmuon::kernels::cuda::host_rounding
