// Pack/unpack round trips (bit-exact), gradient averaging, and the Linear GEMM wrappers
// against naive loops.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/kernel_error.hpp"
#include "kernels/linear.hpp"
#include "kernels/pack.hpp"
#include "kokkos_environment.hpp"
#include "test_util.hpp"

namespace dmuon::kernels {
namespace {

TEST(Pack, RoundTripIsBitExact) {
  auto a = testing::random_matrix(3, 5, 1);
  std::vector<float> b{-0.0f, std::numeric_limits<float>::denorm_min(),
                       std::numeric_limits<float>::max(), std::numeric_limits<float>::quiet_NaN()};
  std::vector<float> c;  // empty part
  auto d = testing::random_matrix(7, 1, 2);
  const ConstSlice parts[] = {
      {a.data(), a.size()}, {b.data(), b.size()}, {c.data(), 0}, {d.data(), d.size()}};
  std::vector<float> packed(40, 123.0f);
  const std::size_t used = host::pack(parts, 4, packed.data(), packed.size());
  ASSERT_EQ(used, a.size() + b.size() + d.size());
  EXPECT_EQ(packed[used], 123.0f);  // nothing written past the end
  std::vector<float> a2(a.size()), b2(b.size()), d2(d.size());
  const Slice out[] = {
      {a2.data(), a2.size()}, {b2.data(), b2.size()}, {nullptr, 0}, {d2.data(), d2.size()}};
  host::unpack(packed.data(), used, out, 4);
  EXPECT_EQ(std::memcmp(a.data(), a2.data(), a.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(b.data(), b2.data(), b.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(d.data(), d2.data(), d.size() * sizeof(float)), 0);
}

TEST(Pack, SizeMismatchThrows) {
  std::vector<float> a(10), packed(9);
  const ConstSlice parts[] = {{a.data(), a.size()}};
  EXPECT_THROW(host::pack(parts, 1, packed.data(), packed.size()), KernelError);
  const Slice out[] = {{a.data(), a.size()}};
  EXPECT_THROW(host::unpack(packed.data(), packed.size(), out, 1), KernelError);
}

TEST(AverageGradient, ScalesByInverseCount) {
  std::vector<float> g{4.0f, -8.0f, 2.0f};
  host::average_gradient(g.data(), g.size(), 4);
  EXPECT_EQ(g[0], 1.0f);
  EXPECT_EQ(g[1], -2.0f);
  EXPECT_EQ(g[2], 0.5f);
  EXPECT_THROW(host::average_gradient(g.data(), g.size(), 0), KernelError);
}

TEST(Linear, ForwardAndBackwardMatchNaiveLoops) {
  const std::size_t batch = 7, in = 5, out = 3;
  const auto x = testing::random_matrix(batch, in, 1);
  const auto w = testing::random_matrix(out, in, 2);
  const auto dy = testing::random_matrix(batch, out, 3);
  std::vector<float> y(batch * out), dx(batch * in), dw(out * in);
  host::linear_forward(x.data(), w.data(), y.data(), batch, in, out);
  host::linear_backward_input(dy.data(), w.data(), dx.data(), batch, in, out);
  host::linear_backward_weight(dy.data(), x.data(), dw.data(), batch, in, out);
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t o = 0; o < out; ++o) {
      double s = 0;
      for (std::size_t i = 0; i < in; ++i) s += double(x[b * in + i]) * w[o * in + i];
      EXPECT_NEAR(y[b * out + o], s, 1e-5);
    }
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t i = 0; i < in; ++i) {
      double s = 0;
      for (std::size_t o = 0; o < out; ++o) s += double(dy[b * out + o]) * w[o * in + i];
      EXPECT_NEAR(dx[b * in + i], s, 1e-5);
    }
  for (std::size_t o = 0; o < out; ++o)
    for (std::size_t i = 0; i < in; ++i) {
      double s = 0;
      for (std::size_t b = 0; b < batch; ++b) s += double(dy[b * out + o]) * x[b * in + i];
      EXPECT_NEAR(dw[o * in + i], s, 1e-5);
    }
  auto dw2 = dw;
  host::linear_backward_weight(dy.data(), x.data(), dw2.data(), batch, in, out, true);
  for (std::size_t i = 0; i < dw.size(); ++i) EXPECT_NEAR(dw2[i], 2 * dw[i], 1e-5);
}

TEST(Gemm, AllTransposeCombinationsMatchNaive) {
  const std::size_t m = 4, n = 6, k = 5;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const auto a = testing::random_matrix(ta ? k : m, ta ? m : k, 4);
      const auto b = testing::random_matrix(tb ? n : k, tb ? k : n, 5);
      std::vector<float> c(m * n, 1.0f);
      host::gemm(ta, tb, m, n, k, 2.0f, a.data(), b.data(), 0.5f, c.data());
      for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < n; ++j) {
          double s = 0;
          for (std::size_t p = 0; p < k; ++p)
            s += double(ta ? a[p * m + i] : a[i * k + p]) * (tb ? b[j * k + p] : b[p * n + j]);
          EXPECT_NEAR(c[i * n + j], 2 * s + 0.5, 1e-5) << ta << tb;
        }
    }
}

}  // namespace
}  // namespace dmuon::kernels
