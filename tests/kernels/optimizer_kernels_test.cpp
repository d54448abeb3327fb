// Muon and AdamW steps against hand-written double-precision references (SPEC §7).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/adamw.hpp"
#include "kernels/kernel_error.hpp"
#include "kernels/muon.hpp"
#include "kokkos_environment.hpp"
#include "test_util.hpp"

namespace dmuon::kernels {
namespace {

using testing::MatD;

// Muon in double, written from SPEC §7 independently of the kernel code.
struct MuonRef {
  MatD w, buf;
  void step(const MatD& g, std::size_t rows, std::size_t cols, long t, const MuonConfig& c) {
    if (t == 1) {
      buf = g;
    } else {
      for (std::size_t i = 0; i < g.size(); ++i) buf[i] = c.momentum * buf[i] + g[i];
    }
    MatD in(g.size());
    for (std::size_t i = 0; i < g.size(); ++i)
      in[i] = c.nesterov ? g[i] + c.momentum * buf[i] : buf[i];
    std::vector<std::array<double, 3>> co;
    for (const auto& s : ns_schedule(c.ns.coefficients, c.ns.steps)) co.push_back({s.a, s.b, s.c});
    const MatD o = testing::ns_reference(in, rows, cols, co);
    const double scale = 0.2 * std::sqrt(static_cast<double>(std::max(rows, cols)));
    const double lr = c.lr, wd = c.weight_decay;
    for (std::size_t i = 0; i < w.size(); ++i) {
      if (wd > 0) w[i] *= 1.0 - lr * wd;
      w[i] -= lr * scale * o[i];
    }
  }
};

void run_muon_case(std::size_t rows, std::size_t cols, const MuonConfig& cfg) {
  const std::size_t n = rows * cols;
  auto w = testing::random_matrix(rows, cols, 100);
  std::vector<float> buf(n, 0.0f);
  MuonRef ref{testing::to_double(w), MatD(n, 0.0)};
  host::NsWorkspace ws(rows, cols);
  for (long t = 1; t <= 4; ++t) {
    const auto g = testing::random_matrix(rows, cols, 200 + static_cast<unsigned>(t));
    host::muon_step(w.data(), g.data(), buf.data(), rows, cols, t, cfg, ws, "w");
    ref.step(testing::to_double(g), rows, cols, t, cfg);
    for (std::size_t i = 0; i < n; ++i) {
      EXPECT_NEAR(buf[i], ref.buf[i], 1e-5 * (1 + std::abs(ref.buf[i]))) << "step " << t;
      // fp32 NS on a 2×3 matrix agrees with double to ~1e-6 relative; the update is lr·scale·O.
      EXPECT_NEAR(w[i], ref.w[i], 2e-6) << "step " << t << " elem " << i;
    }
  }
}

TEST(MuonStep, Wide2x3NesterovPolarExpress) {
  run_muon_case(2, 3, MuonConfig{});
}

TEST(MuonStep, Tall3x2ClassicWithWeightDecay) {
  MuonConfig cfg;
  cfg.ns.coefficients = NsCoefficientSet::classic_muon;
  cfg.weight_decay = 0.1f;
  cfg.lr = 0.05f;
  run_muon_case(3, 2, cfg);
}

TEST(MuonStep, PlainMomentumGramForm) {
  MuonConfig cfg;
  cfg.nesterov = false;
  cfg.ns.variant = NsVariant::gram;
  run_muon_case(3, 2, cfg);
  run_muon_case(2, 3, cfg);
}

TEST(MuonStep, ScaleFollowsSpec) {
  EXPECT_FLOAT_EQ(muon_scale(2, 3), 0.2f * std::sqrt(3.0f));
  EXPECT_FLOAT_EQ(muon_scale(4096, 1024), 0.2f * 64.0f);
}

TEST(MuonStep, NonFiniteGradientNamesParameterAndLeavesStateUntouched) {
  std::vector<float> w(6, 1.0f), buf(6, 0.5f), g(6, 0.1f);
  g[4] = std::nanf("");
  host::NsWorkspace ws(2, 3);
  try {
    host::muon_step(w.data(), g.data(), buf.data(), 2, 3, 2, MuonConfig{}, ws, "blocks.0.attn.q");
    FAIL() << "no exception";
  } catch (const KernelError& e) {
    EXPECT_NE(std::string(e.what()).find("blocks.0.attn.q"), std::string::npos) << e.what();
  }
  for (float v : w) EXPECT_EQ(v, 1.0f);
  for (float v : buf) EXPECT_EQ(v, 0.5f);
}

TEST(MuonStep, ShapeMismatchAndBadStepThrow) {
  std::vector<float> w(6), buf(6), g(6, 0.1f);
  host::NsWorkspace ws(2, 3);
  EXPECT_THROW(host::muon_step(w.data(), g.data(), buf.data(), 3, 2, 1, MuonConfig{}, ws, "w"),
               KernelError);
  EXPECT_THROW(host::muon_step(w.data(), g.data(), buf.data(), 2, 3, 0, MuonConfig{}, ws, "w"),
               KernelError);
  EXPECT_THROW(host::muon_step(nullptr, g.data(), buf.data(), 2, 3, 1, MuonConfig{}, ws, "w"),
               KernelError);
}

TEST(AdamWStep, MatchesDoubleReferenceOverSteps) {
  AdamWConfig cfg;  // defaults: lr 1e-3, betas 0.9/0.999, eps 1e-8, wd 0.01
  const std::size_t n = 6;
  auto w = testing::random_matrix(2, 3, 7);
  std::vector<float> m(n, 0.0f), v(n, 0.0f);
  MatD rw = testing::to_double(w), rm(n, 0.0), rv(n, 0.0);
  for (long t = 1; t <= 5; ++t) {
    auto g = testing::random_matrix(2, 3, 50 + static_cast<unsigned>(t));
    g[0] = 1e-6f;  // tiny gradient: eps matters
    host::adamw_step(w.data(), g.data(), m.data(), v.data(), n, t, cfg, "ln.bias");
    for (std::size_t i = 0; i < n; ++i) {
      rw[i] *= 1.0 - 1e-3 * 0.01;
      rm[i] = 0.9 * rm[i] + 0.1 * g[i];
      rv[i] = 0.999 * rv[i] + 0.001 * double(g[i]) * g[i];
      const double mhat = rm[i] / (1.0 - std::pow(0.9, t));
      const double vhat = rv[i] / (1.0 - std::pow(0.999, t));
      rw[i] -= 1e-3 * mhat / (std::sqrt(vhat) + 1e-8);
      EXPECT_NEAR(m[i], rm[i], 1e-6 * (1 + std::abs(rm[i])));
      EXPECT_NEAR(v[i], rv[i], 1e-6 * (1 + std::abs(rv[i])));
      EXPECT_NEAR(w[i], rw[i], 1e-6) << "step " << t << " elem " << i;
    }
  }
}

TEST(AdamWStep, NonFiniteGradientNamesParameter) {
  std::vector<float> w(3, 1.0f), m(3, 0.0f), v(3, 0.0f), g{0.1f, INFINITY, 0.2f};
  try {
    host::adamw_step(w.data(), g.data(), m.data(), v.data(), 3, 1, AdamWConfig{}, "embed.weight");
    FAIL() << "no exception";
  } catch (const KernelError& e) {
    EXPECT_NE(std::string(e.what()).find("embed.weight"), std::string::npos) << e.what();
  }
  for (float x : w) EXPECT_EQ(x, 1.0f);
  EXPECT_THROW(host::adamw_step(w.data(), g.data(), m.data(), v.data(), 3, 0, AdamWConfig{}, "b"),
               KernelError);
}

}  // namespace
}  // namespace dmuon::kernels
