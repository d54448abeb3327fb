// fp32/bf16/fp16 conversion: hand-computed bit patterns (ties both ways, largest finite values,
// overflow, subnormals, signed zeros, Inf, NaN), exhaustive round trips over all 65536 bf16 and
// fp16 patterns, a sweep against independent oracles (round to nearest even computed in
// double for bf16; the compiler's _Float16 where it has one), and the bulk convert() for
// every pair of types.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/convert.hpp"
#include "kernels/dtype.hpp"
#include "kernels/kernel_error.hpp"
#include "kernels/scoped_kokkos.hpp"
#include "kokkos_environment.hpp"

namespace dmuon::kernels {
namespace {

using host::bf16_to_float;
using host::f16_to_float;
using host::float_to_bf16;
using host::float_to_f16;

float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
std::uint32_t to_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

struct Case {
  std::uint32_t in;   // fp32 bits
  std::uint16_t out;  // expected bits
  const char* what;
};

// Each expectation worked out by hand from the bit layout (bf16 = the top 16 bits of fp32).
TEST(Convert, Bf16FromFloatHandComputed) {
  const Case cases[] = {
      {0x3f800000u, 0x3f80u, "1.0 exact"},
      {0x3f808000u, 0x3f80u, "tie 1 + 2^-8, kept bit even: down"},
      {0x3f818000u, 0x3f82u, "tie 1 + 3*2^-8, kept bit odd: up"},
      {0x3f807fffu, 0x3f80u, "just below the tie: down"},
      {0x3f808001u, 0x3f81u, "just above the tie: up"},
      {0xbf818000u, 0xbf82u, "negative tie, odd: away from zero"},
      {0xbf808000u, 0xbf80u, "negative tie, even: toward zero"},
      {0x3fffffffu, 0x4000u, "carry into the exponent (2 - 2^-23 -> 2)"},
      {0x7f7f0000u, 0x7f7fu, "largest finite bf16"},
      {0x7f7f7fffu, 0x7f7fu, "below the overflow midpoint"},
      {0x7f7f8000u, 0x7f80u, "overflow midpoint (2 - 2^-8)*2^127, odd: Inf"},
      {0x7f7fffffu, 0x7f80u, "largest finite fp32 overflows to Inf"},
      {0xff7fffffu, 0xff80u, "negative overflow to -Inf"},
      {0x7f800000u, 0x7f80u, "+Inf"},
      {0xff800000u, 0xff80u, "-Inf"},
      {0x00000000u, 0x0000u, "+0"},
      {0x80000000u, 0x8000u, "-0"},
      {0x00000001u, 0x0000u, "smallest fp32 subnormal rounds to +0"},
      {0x80000001u, 0x8000u, "negative tiny rounds to -0"},
      {0x00008000u, 0x0000u, "tie at half the smallest bf16 subnormal: to even 0"},
      {0x00008001u, 0x0001u, "just above: smallest bf16 subnormal"},
      {0x00018000u, 0x0002u, "tie between subnormals 1 and 2: even 2"},
      {0x00010000u, 0x0001u, "smallest bf16 subnormal 2^-133 exact"},
      {0x007fffffu, 0x0080u, "largest fp32 subnormal rounds up to the smallest normal"},
      {0x7fc00000u, 0x7fc0u, "quiet NaN"},
      {0xffc00000u, 0xffc0u, "negative quiet NaN keeps its sign"},
      {0x7f800001u, 0x7fc0u, "signalling NaN, payload below bit 16: stays NaN (quiet)"},
      {0xff800001u, 0xffc0u, "negative signalling NaN"},
      {0x7f810000u, 0x7fc1u, "signalling NaN: top payload kept, quiet bit set"},
      {0x7fffffffu, 0x7fffu, "NaN with all payload bits: not rounded into Inf or a carry"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(float_to_bf16(from_bits(c.in)), c.out)
        << c.what << ": 0x" << std::hex << c.in << " -> 0x" << float_to_bf16(from_bits(c.in));
  }
}

TEST(Convert, Bf16ToFloatHandComputed) {
  EXPECT_EQ(to_bits(bf16_to_float(0x3f80u)), 0x3f800000u);
  EXPECT_EQ(to_bits(bf16_to_float(0x0001u)), 0x00010000u);  // smallest subnormal, 2^-133
  EXPECT_EQ(to_bits(bf16_to_float(0x7f7fu)), 0x7f7f0000u);  // largest finite
  EXPECT_EQ(to_bits(bf16_to_float(0x8000u)), 0x80000000u);  // -0
  EXPECT_EQ(to_bits(bf16_to_float(0xff80u)), 0xff800000u);  // -Inf
  EXPECT_EQ(to_bits(bf16_to_float(0x7f81u)), 0x7f810000u);  // signalling NaN, exact
  EXPECT_EQ(to_bits(bf16_to_float(0xffc1u)), 0xffc10000u);  // negative quiet NaN, exact
}

// fp16: 1 sign, 5 exponent (bias 15), 10 mantissa bits; subnormals are m·2^-24.
TEST(Convert, F16FromFloatHandComputed) {
  const Case cases[] = {
      {0x3f800000u, 0x3c00u, "1.0 exact"},
      {0x3f801000u, 0x3c00u, "tie 1 + 2^-11, kept bit even: down"},
      {0x3f803000u, 0x3c02u, "tie 1 + 3*2^-11, kept bit odd: up"},
      {0x3f800fffu, 0x3c00u, "just below the tie"},
      {0x3f801001u, 0x3c01u, "just above the tie"},
      {0xbf803000u, 0xbc02u, "negative tie, odd: away from zero"},
      {0x3fffffffu, 0x4000u, "carry into the exponent (2 - 2^-23 -> 2)"},
      {0x477fe000u, 0x7bffu, "65504, largest finite fp16"},
      {0x477fefffu, 0x7bffu, "just below 65520"},
      {0x477ff000u, 0x7c00u, "65520: overflow midpoint, odd: Inf"},
      {0x47800000u, 0x7c00u, "65536: Inf"},
      {0x7f7fffffu, 0x7c00u, "largest finite fp32: Inf"},
      {0xc77ff000u, 0xfc00u, "-65520: -Inf"},
      {0xc77fe000u, 0xfbffu, "-65504"},
      {0x7f800000u, 0x7c00u, "+Inf"},
      {0xff800000u, 0xfc00u, "-Inf"},
      {0x38800000u, 0x0400u, "2^-14, smallest normal"},
      {0x387fc000u, 0x03ffu, "1023*2^-24, largest subnormal"},
      {0x387fe000u, 0x0400u, "1023.5*2^-24: tie, odd: up to the smallest normal"},
      {0x387fa000u, 0x03feu, "1022.5*2^-24: tie, even: down"},
      {0x33800000u, 0x0001u, "2^-24, smallest subnormal"},
      {0x33000000u, 0x0000u, "2^-25: tie between 0 and 2^-24: even 0"},
      {0x33000001u, 0x0001u, "just above 2^-25: smallest subnormal"},
      {0x32ffffffu, 0x0000u, "just below 2^-25: 0"},
      {0x33c00000u, 0x0002u, "1.5*2^-24: tie between 1 and 2: even 2"},
      {0x34200000u, 0x0002u, "2.5*2^-24: tie between 2 and 3: even 2"},
      {0xb3800000u, 0x8001u, "-2^-24"},
      {0xb2800000u, 0x8000u, "-2^-26 rounds to -0"},
      {0x00000001u, 0x0000u, "smallest fp32 subnormal: +0"},
      {0x80000000u, 0x8000u, "-0"},
      {0x00000000u, 0x0000u, "+0"},
      {0x7fc00000u, 0x7e00u, "quiet NaN"},
      {0xffc00000u, 0xfe00u, "negative quiet NaN keeps its sign"},
      {0x7f800001u, 0x7e00u, "signalling NaN, payload below bit 13: quiet NaN"},
      {0x7fa00000u, 0x7f00u, "signalling NaN: top payload kept, quiet bit set"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(float_to_f16(from_bits(c.in)), c.out)
        << c.what << ": 0x" << std::hex << c.in << " -> 0x" << float_to_f16(from_bits(c.in));
  }
}

TEST(Convert, F16ToFloatHandComputed) {
  EXPECT_EQ(to_bits(f16_to_float(0x3c00u)), 0x3f800000u);  // 1
  EXPECT_EQ(to_bits(f16_to_float(0x0001u)), 0x33800000u);  // 2^-24
  EXPECT_EQ(to_bits(f16_to_float(0x03ffu)), 0x387fc000u);  // largest subnormal
  EXPECT_EQ(to_bits(f16_to_float(0x0400u)), 0x38800000u);  // 2^-14
  EXPECT_EQ(to_bits(f16_to_float(0x7bffu)), 0x477fe000u);  // 65504
  EXPECT_EQ(to_bits(f16_to_float(0x8001u)), 0xb3800000u);  // -2^-24
  EXPECT_EQ(to_bits(f16_to_float(0x0000u)), 0x00000000u);  // +0
  EXPECT_EQ(to_bits(f16_to_float(0x8000u)), 0x80000000u);  // -0
  EXPECT_EQ(to_bits(f16_to_float(0x7c00u)), 0x7f800000u);  // +Inf
  EXPECT_EQ(to_bits(f16_to_float(0xfc00u)), 0xff800000u);  // -Inf
  EXPECT_EQ(to_bits(f16_to_float(0x7e00u)), 0x7fc00000u);  // quiet NaN
  EXPECT_EQ(to_bits(f16_to_float(0x7c01u)), 0x7f802000u);  // signalling NaN, payload exact
  EXPECT_EQ(to_bits(f16_to_float(0xfe01u)), 0xffc02000u);  // negative NaN
}

bool bf16_is_nan(std::uint16_t h) {
  return (h & 0x7fffu) > 0x7f80u;
}
bool f16_is_nan(std::uint16_t h) {
  return (h & 0x7fffu) > 0x7c00u;
}

// Widening is exact and narrowing the result returns the pattern: the identity on every
// non-NaN pattern; NaNs stay NaN with their sign (quiet NaNs keep their bits too).
TEST(Convert, RoundTripIsIdentityOnAll65536Patterns) {
  for (std::uint32_t p = 0; p <= 0xffffu; ++p) {
    const auto h = static_cast<std::uint16_t>(p);
    const std::uint16_t b = float_to_bf16(bf16_to_float(h));
    const std::uint16_t f = float_to_f16(f16_to_float(h));
    if (!bf16_is_nan(h)) {
      ASSERT_EQ(b, h) << "bf16 0x" << std::hex << p;
    } else {
      ASSERT_TRUE(bf16_is_nan(b) && (b & 0x8000u) == (h & 0x8000u)) << "bf16 0x" << std::hex << p;
      if (h & 0x0040u) {
        ASSERT_EQ(b, h) << "quiet bf16 NaN 0x" << std::hex << p;
      }
    }
    if (!f16_is_nan(h)) {
      ASSERT_EQ(f, h) << "f16 0x" << std::hex << p;
    } else {
      ASSERT_TRUE(f16_is_nan(f) && (f & 0x8000u) == (h & 0x8000u)) << "f16 0x" << std::hex << p;
      if (h & 0x0200u) {
        ASSERT_EQ(f, h) << "quiet f16 NaN 0x" << std::hex << p;
      }
    }
  }
}

// Widening agrees with the value each pattern encodes, computed from its fields in double.
TEST(Convert, WideningMatchesTheEncodedValue) {
  for (std::uint32_t p = 0; p <= 0xffffu; ++p) {
    const auto h = static_cast<std::uint16_t>(p);
    const double s = (p & 0x8000u) ? -1.0 : 1.0;
    {  // fp16
      const int e = static_cast<int>((p >> 10) & 0x1fu);
      const double m = static_cast<double>(p & 0x3ffu);
      const float got = f16_to_float(h);
      if (e == 0x1f) {
        ASSERT_EQ(std::isnan(got), m != 0.0) << std::hex << p;
        if (m == 0.0) {
          ASSERT_EQ(got, static_cast<float>(s * INFINITY)) << std::hex << p;
        }
      } else {
        const double v = e == 0 ? s * std::ldexp(m, -24) : s * std::ldexp(1024.0 + m, e - 25);
        ASSERT_EQ(static_cast<double>(got), v) << std::hex << p;
        ASSERT_EQ(std::signbit(got), (p & 0x8000u) != 0) << std::hex << p;
      }
    }
    {  // bf16
      const int e = static_cast<int>((p >> 7) & 0xffu);
      const double m = static_cast<double>(p & 0x7fu);
      const float got = bf16_to_float(h);
      if (e == 0xff) {
        ASSERT_EQ(std::isnan(got), m != 0.0) << std::hex << p;
      } else {
        const double v = e == 0 ? s * std::ldexp(m, -133) : s * std::ldexp(128.0 + m, e - 134);
        ASSERT_EQ(static_cast<double>(got), v) << std::hex << p;
      }
    }
  }
}

// Reference bf16 rounding, written independently of the kernel: the two neighbours of x in
// bf16, compared in double (exact here); ties to the even pattern; overflow per IEEE (the
// neighbour above the largest finite value counts as 2^128 and stands for Inf).
std::uint16_t bf16_reference(float x) {
  const std::uint32_t u = to_bits(x);
  const std::uint32_t sign = u & 0x80000000u;
  const std::uint32_t a = u & 0x7fffffffu;
  if (a == 0x7f800000u) return static_cast<std::uint16_t>((sign | a) >> 16);  // ±Inf
  const std::uint32_t lo = a & 0xffff0000u, hi = lo + 0x10000u;
  const auto value = [](std::uint32_t bits) {
    return bits >= 0x7f800000u ? std::ldexp(1.0, 128) : static_cast<double>(from_bits(bits));
  };
  const double ax = from_bits(a), dlo = ax - value(lo), dhi = value(hi) - ax;
  std::uint32_t r = lo;
  if (dhi < dlo || (dhi == dlo && ((lo >> 16) & 1u))) r = hi;
  return static_cast<std::uint16_t>((sign | r) >> 16);
}

// fp32 inputs: every upper half with low halves around the rounding points of both formats
// (ties, ±1), plus random patterns. NaNs compared by class and sign only.
std::vector<std::uint32_t> sweep_patterns() {
  std::vector<std::uint32_t> out;
  const std::uint32_t lows[] = {0x0000u, 0x0001u, 0x0fffu, 0x1000u, 0x1001u, 0x2000u, 0x3000u,
                                0x5a5au, 0x7fffu, 0x8000u, 0x8001u, 0x9000u, 0xf000u, 0xffffu};
  for (std::uint32_t hi = 0; hi <= 0xffffu; ++hi) {
    for (std::uint32_t lo : lows) out.push_back((hi << 16) | lo);
  }
  std::mt19937 gen(7);
  for (int i = 0; i < 1000000; ++i) out.push_back(static_cast<std::uint32_t>(gen()));
  return out;
}

TEST(Convert, Bf16MatchesIndependentReferenceOnSweep) {
  for (std::uint32_t u : sweep_patterns()) {
    const float x = from_bits(u);
    const std::uint16_t got = float_to_bf16(x);
    if (std::isnan(x)) {
      ASSERT_TRUE(bf16_is_nan(got) && (got >> 15) == (u >> 31)) << std::hex << u;
    } else {
      ASSERT_EQ(got, bf16_reference(x)) << "0x" << std::hex << u;
    }
  }
}

#ifdef __FLT16_MAX__
// The compiler's _Float16 conversion (IEEE round to nearest even, subnormals, overflow).
TEST(Convert, F16MatchesCompilerFloat16OnSweep) {
  for (std::uint32_t u : sweep_patterns()) {
    const float x = from_bits(u);
    const std::uint16_t got = float_to_f16(x);
    const _Float16 ref = static_cast<_Float16>(x);
    std::uint16_t ref_bits;
    std::memcpy(&ref_bits, &ref, sizeof ref_bits);
    if (std::isnan(x)) {
      ASSERT_TRUE(f16_is_nan(got) && (got >> 15) == (u >> 31)) << std::hex << u;
    } else {
      ASSERT_EQ(got, ref_bits) << "0x" << std::hex << u;
    }
  }
  for (std::uint32_t p = 0; p <= 0xffffu; ++p) {
    const auto h = static_cast<std::uint16_t>(p);
    _Float16 v;
    std::memcpy(&v, &h, sizeof v);
    const float ref = static_cast<float>(v);
    if (std::isnan(ref)) {
      ASSERT_TRUE(std::isnan(f16_to_float(h)));
    } else {
      ASSERT_EQ(to_bits(f16_to_float(h)), to_bits(ref)) << std::hex << p;
    }
  }
}
#else
TEST(Convert, F16MatchesCompilerFloat16OnSweep) {
  GTEST_SKIP() << "this compiler has no _Float16 (the hand-computed cases still run)";
}
#endif

// A buffer of `type` elements holding the given fp32 values (narrowed by the scalar helpers).
std::vector<std::uint8_t> encode(const std::vector<float>& v, Dtype type) {
  std::vector<std::uint8_t> out(v.size() * dtype_bytes(type));
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (type == Dtype::f32) {
      std::memcpy(out.data() + 4 * i, &v[i], 4);
    } else {
      const std::uint16_t h = type == Dtype::bf16 ? float_to_bf16(v[i]) : float_to_f16(v[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

float decode_one(const std::uint8_t* p, Dtype type) {
  if (type == Dtype::f32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  std::uint16_t h;
  std::memcpy(&h, p, 2);
  return type == Dtype::bf16 ? bf16_to_float(h) : f16_to_float(h);
}

// The expected element: widen exactly, then narrow with the scalar helper.
std::vector<std::uint8_t> expected(const std::vector<std::uint8_t>& src, Dtype from, Dtype to,
                                   std::size_t n) {
  if (from == to) return src;
  std::vector<float> wide(n);
  for (std::size_t i = 0; i < n; ++i)
    wide[i] = decode_one(src.data() + i * dtype_bytes(from), from);
  return encode(wide, to);
}

TEST(Convert, BulkConvertEveryPairMatchesScalarHelpers) {
  std::vector<float> values = {1.0f,
                               -0.0f,
                               0.0f,
                               65504.0f,
                               65520.0f,
                               -1e30f,
                               std::numeric_limits<float>::max(),
                               std::numeric_limits<float>::denorm_min(),
                               from_bits(0x33000000u),  // 2^-25
                               from_bits(0x3f808000u),  // bf16 tie
                               from_bits(0x3f803000u),  // f16 tie
                               INFINITY,
                               -INFINITY,
                               std::nanf(""),
                               -std::nanf("")};
  std::mt19937 gen(3);
  std::normal_distribution<float> dist(0.0f, 100.0f);
  for (int i = 0; i < 1000; ++i) values.push_back(dist(gen));
  const std::size_t n = values.size();
  for (Dtype from : {Dtype::f32, Dtype::bf16, Dtype::f16}) {
    const auto src = encode(values, from);
    for (Dtype to : {Dtype::f32, Dtype::bf16, Dtype::f16}) {
      std::vector<std::uint8_t> dst(n * dtype_bytes(to), 0xab);
      host::convert(src.data(), from, dst.data(), to, n);
      host::fence();
      EXPECT_EQ(dst, expected(src, from, to, n)) << dtype_name(from) << " -> " << dtype_name(to);
    }
  }
}

TEST(Convert, SameBufferSameTypeAndEmptyAndBadArguments) {
  std::vector<std::uint16_t> h{0x3f80u, 0x7fc1u};
  host::convert(h.data(), Dtype::bf16, h.data(), Dtype::bf16, h.size());  // no-op
  EXPECT_EQ(h[0], 0x3f80u);
  EXPECT_EQ(h[1], 0x7fc1u);
  host::convert(nullptr, Dtype::f32, nullptr, Dtype::bf16, 0);  // empty: nothing to touch
  EXPECT_THROW(host::convert(nullptr, Dtype::f32, h.data(), Dtype::bf16, 1), KernelError);
  EXPECT_THROW(host::convert(h.data(), Dtype::bf16, nullptr, Dtype::f32, 1), KernelError);
  float f = 0.0f;
  EXPECT_THROW(host::convert(h.data(), static_cast<Dtype>(7), &f, Dtype::f32, 1), KernelError);
  EXPECT_THROW(host::convert(h.data(), Dtype::bf16, &f, static_cast<Dtype>(7), 1), KernelError);
}

}  // namespace
}  // namespace dmuon::kernels
