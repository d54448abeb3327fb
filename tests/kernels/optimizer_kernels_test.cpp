// Muon and AdamW steps against hand-written double-precision references (SPEC §7).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/adamw.hpp"
#include "kernels/kernel_error.hpp"
#include "kernels/muon.hpp"
#include "kernels/newton_schulz.hpp"
#include "kokkos_environment.hpp"
#include "test_util.hpp"

namespace dmuon::kernels {
namespace {

using testing::MatD;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

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

// The fused kernels count non-finite values in the pass that computes: every count below is
// checked against hand-planted NaN/±Inf positions, and the finite positions against the
// formula.

TEST(MuonMomentum, CountsPlantedNonFiniteGradients) {
  const std::size_t n = 11;
  const float mu = 0.95f;
  for (long step : {1L, 2L}) {
    for (bool nesterov : {true, false}) {
      std::vector<float> g(n), buf(n), in(n, 123.0f);
      for (std::size_t i = 0; i < n; ++i) {
        g[i] = 0.1f * static_cast<float>(i + 1) * (i % 2 ? -1.0f : 1.0f);
        buf[i] = 0.5f - 0.05f * static_cast<float>(i);
      }
      const std::vector<float> buf0 = buf;
      g[1] = kNaN;
      g[4] = kInf;
      g[9] = -kInf;
      const std::size_t bad =
          host::muon_momentum(g.data(), buf.data(), in.data(), n, step, mu, nesterov);
      EXPECT_EQ(bad, 3u) << "step " << step << " nesterov " << nesterov;
      for (std::size_t i = 0; i < n; ++i) {
        if (i == 1 || i == 4 || i == 9) continue;  // garbage allowed: the caller aborts
        const float b = step == 1 ? g[i] : mu * buf0[i] + g[i];
        EXPECT_FLOAT_EQ(buf[i], b) << i;
        EXPECT_FLOAT_EQ(in[i], nesterov ? g[i] + mu * b : b) << i;
      }
    }
  }
  std::vector<float> g(5, 0.25f), buf(5, 1.0f), in(5);
  EXPECT_EQ(host::muon_momentum(g.data(), buf.data(), in.data(), 5, 3, mu, true), 0u);
  EXPECT_EQ(host::muon_momentum(nullptr, nullptr, nullptr, 0, 1, mu, true), 0u);
  EXPECT_THROW(host::muon_momentum(nullptr, buf.data(), in.data(), 5, 1, mu, true), KernelError);
}

TEST(MuonApply, CountsPlantedNonFiniteResults) {
  const std::size_t n = 10;
  const float lr = 0.5f, wd = 0.1f, scale = 2.0f;  // decay 0.95, step lr·scale = 1
  std::vector<float> w(n), o(n);
  for (std::size_t i = 0; i < n; ++i) {
    w[i] = 1.0f + static_cast<float>(i);
    o[i] = 0.01f * static_cast<float>(i) - 0.02f;
  }
  w[1] = kNaN;     // non-finite weight stays non-finite
  o[5] = kInf;     // non-finite update: -Inf
  w[3] = 3.3e38f;  // 0.95·3.3e38 + 1e38 overflows to +Inf
  o[3] = -1e38f;
  o[8] = -kNaN;  // NaN update
  const std::vector<float> w0 = w;
  EXPECT_EQ(host::muon_apply(w.data(), o.data(), n, lr, wd, scale), 4u);
  EXPECT_TRUE(std::isnan(w[1]));
  EXPECT_EQ(w[3], kInf);
  EXPECT_EQ(w[5], -kInf);
  EXPECT_TRUE(std::isnan(w[8]));
  for (std::size_t i : {0, 2, 4, 6, 7, 9}) {
    EXPECT_FLOAT_EQ(w[i], (1.0f - lr * wd) * w0[i] - lr * scale * o[i]) << i;
  }
  // Finite data counts zero; an empty range may be null.
  std::vector<float> w2(4, 1.0f), o2(4, 0.5f);
  EXPECT_EQ(host::muon_apply(w2.data(), o2.data(), 4, lr, wd, scale), 0u);
  EXPECT_EQ(host::muon_apply(nullptr, nullptr, 0, lr, wd, scale), 0u);
  EXPECT_THROW(host::muon_apply(w2.data(), nullptr, 4, lr, wd, scale), KernelError);
}

TEST(AdamWUpdate, CountsPlantedNonFiniteGradientsAndMatchesAdamWStep) {
  const std::size_t n = 8;
  AdamWConfig cfg;
  auto g = testing::random_matrix(1, n, 4);
  auto w = testing::random_matrix(1, n, 5);
  std::vector<float> m(n, 0.01f), v(n, 0.02f);
  // adamw_step on the finite gradient is the reference for the finite positions.
  auto w_ref = w, m_ref = m, v_ref = v;
  host::adamw_step(w_ref.data(), g.data(), m_ref.data(), v_ref.data(), n, 3, cfg, "ref");
  g[0] = kNaN;
  g[3] = kInf;
  g[5] = -kInf;
  EXPECT_EQ(host::adamw_update(w.data(), g.data(), m.data(), v.data(), n, 3, cfg), 3u);
  for (std::size_t i : {1, 2, 4, 6, 7}) {
    EXPECT_EQ(w[i], w_ref[i]) << i;  // same arithmetic, bit for bit
    EXPECT_EQ(m[i], m_ref[i]) << i;
    EXPECT_EQ(v[i], v_ref[i]) << i;
  }
  // A finite gradient counts zero; bad arguments throw; an empty range may be null.
  std::vector<float> g2(3, 0.1f), w2(3, 1.0f), m2(3, 0.0f), v2(3, 0.0f);
  EXPECT_EQ(host::adamw_update(w2.data(), g2.data(), m2.data(), v2.data(), 3, 1, cfg), 0u);
  EXPECT_THROW(host::adamw_update(w2.data(), g2.data(), m2.data(), v2.data(), 3, 0, cfg),
               KernelError);
  EXPECT_THROW(host::adamw_update(w2.data(), g2.data(), nullptr, v2.data(), 3, 1, cfg),
               KernelError);
  EXPECT_EQ(host::adamw_update(nullptr, nullptr, nullptr, nullptr, 0, 1, cfg), 0u);
}

TEST(CountNonFinite, CountsPlantedValues) {
  std::vector<float> x(100, 1.0f);
  EXPECT_EQ(host::count_non_finite(x.data(), x.size()), 0u);
  x[0] = kNaN;
  x[17] = kInf;
  x[18] = -kInf;
  x[99] = -kNaN;
  x[50] = std::numeric_limits<float>::max();         // finite
  x[51] = std::numeric_limits<float>::denorm_min();  // finite
  EXPECT_EQ(host::count_non_finite(x.data(), x.size()), 4u);
  EXPECT_EQ(host::count_non_finite(x.data(), 17), 1u);
  EXPECT_EQ(host::count_non_finite(nullptr, 0), 0u);
}

TEST(MuonStep, NonFiniteUpdatedWeightNamesParameter) {
  std::vector<float> w(6, 1.0f), buf(6, 0.0f), g(6, 0.1f);
  w[2] = kInf;
  host::NsWorkspace ws(2, 3);
  try {
    host::muon_step(w.data(), g.data(), buf.data(), 2, 3, 1, MuonConfig{}, ws, "lm_head");
    FAIL() << "no exception";
  } catch (const KernelError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("lm_head"), std::string::npos) << what;
    EXPECT_NE(what.find("1 non-finite"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace dmuon::kernels
