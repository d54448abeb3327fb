// Newton–Schulz against independent answers: the exact polar factor U·Vᵀ from a LAPACK SVD
// (double), the singular values of the output, tall/wide symmetry and direct/Gram agreement.
#include <gtest/gtest.h>
#include <lapacke.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "kernels/kernel_error.hpp"
#include "kernels/newton_schulz.hpp"
#include "kokkos_environment.hpp"
#include "test_util.hpp"

namespace dmuon::kernels {
namespace {

using testing::MatD;

struct Svd {
  std::vector<double> s;  // descending, length min(m, n)
  MatD u;                 // m×k row-major
  MatD vt;                // k×n row-major
};

Svd svd(const MatD& a_in, std::size_t m, std::size_t n) {
  const std::size_t k = std::min(m, n);
  MatD a = a_in;
  Svd r{std::vector<double>(k), MatD(m * k), MatD(k * n)};
  std::vector<double> superb(k);
  const int info =
      LAPACKE_dgesvd(LAPACK_ROW_MAJOR, 'S', 'S', static_cast<int>(m), static_cast<int>(n), a.data(),
                     static_cast<int>(n), r.s.data(), r.u.data(), static_cast<int>(k), r.vt.data(),
                     static_cast<int>(n), superb.data());
  EXPECT_EQ(info, 0);
  return r;
}

std::vector<float> run_ns(const std::vector<float>& g, std::size_t rows, std::size_t cols,
                          NsCoefficientSet set, NsVariant variant, int steps = 5) {
  host::NsWorkspace ws(rows, cols);
  std::vector<float> out(rows * cols);
  NsConfig cfg;
  cfg.coefficients = set;
  cfg.variant = variant;
  cfg.steps = steps;
  host::newton_schulz(g.data(), out.data(), rows, cols, cfg, ws, "test.weight");
  return out;
}

// g = U diag(s) Vᵀ with random orthogonal U, V (from the SVD of a random matrix).
std::vector<float> with_singular_values(std::size_t m, std::size_t n, const std::vector<double>& s,
                                        unsigned seed) {
  const Svd base = svd(testing::to_double(testing::random_matrix(m, n, seed)), m, n);
  const std::size_t k = std::min(m, n);
  MatD us(m * k);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < k; ++j) us[i * k + j] = base.u[i * k + j] * s[j];
  const MatD g = testing::matmul(us, base.vt, m, k, n);
  return std::vector<float>(g.begin(), g.end());
}

std::vector<double> geometric(std::size_t k, double hi, double lo) {
  std::vector<double> s(k);
  for (std::size_t i = 0; i < k; ++i) {
    s[i] = hi * std::pow(lo / hi, static_cast<double>(i) / static_cast<double>(k - 1));
  }
  return s;
}

void print_band(const char* what, NsCoefficientSet set, NsVariant variant,
                const std::vector<double>& s) {
  std::printf("# %-28s %-13s %-6s sigma(NS) in [%.4f, %.4f]\n", what,
              std::string(to_string(set)).c_str(), std::string(to_string(variant)).c_str(),
              s.back(), s.front());
}

// Singular-value bands after 5 steps (measured here, printed by the tests, then widened by
// ~0.01 for other seeds and BLAS summation orders; the direct and Gram forms agree to 1e-4).
// NS output is U f(Σ) Vᵀ with f the composed odd polynomial, so these are properties of f:
// * classic Muon: its quintic is tuned for speed, not convergence; σ that start above ~0.1 end
//   oscillating in [0.682, 1.134] (well-conditioned input, κ ≲ 6, or equal σ); intermediate σ
//   can overshoot to the polynomial's global maximum 1.201 (seen on the κ = 1e3 input).
// * Polar Express (÷1.05 safety factors): converged σ land in [0.847, 1.123]; the last step's
//   p(1) = 1.077 and its maximum on [0, 1.2] cap the top at ~1.123 for any input.
// * tiny σ have not converged after 5 steps: σ_out ≈ σ_in/‖G‖_F · ∏aₖ (∏a = 485 classic,
//   ≈ 800 Polar Express); for κ = 1e3 geometric spectra that gives 0.21 and 0.35.
struct Band {
  double lo, hi;  // converged singular values (well-conditioned input)
  double hi_any;  // any input
  double lo_ill;  // smallest σ for the κ = 1e3 geometric spectrum
};

Band band_for(NsCoefficientSet set) {
  return set == NsCoefficientSet::classic_muon ? Band{0.67, 1.145, 1.215, 0.18}
                                               : Band{0.835, 1.135, 1.135, 0.30};
}

class NsParam : public ::testing::TestWithParam<std::tuple<NsCoefficientSet, NsVariant>> {};

TEST_P(NsParam, PolarFactorOfWellConditionedInputMatchesSvd) {
  const auto [set, variant] = GetParam();
  const std::size_t m = 48, n = 160;
  const auto g = testing::random_matrix(m, n, 11);
  const Svd ref = svd(testing::to_double(g), m, n);
  const auto o = run_ns(g, m, n, set, variant);
  // Uᵀ O V must be diagonal (NS preserves singular vectors) with entries f(σ) in the band;
  // ‖O − U Vᵀ‖ is then exactly max |f(σ) − 1|.
  const MatD od = testing::to_double(o);
  const MatD ut = testing::transpose(ref.u, m, m);
  const MatD v = testing::transpose(ref.vt, m, n);
  const MatD d = testing::matmul(testing::matmul(ut, od, m, m, n), v, m, n, m);
  const Band band = band_for(set);
  double off = 0.0;
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < m; ++j) {
      if (i == j) {
        EXPECT_GE(d[i * m + i], band.lo) << i;
        EXPECT_LE(d[i * m + i], band.hi) << i;
      } else {
        off = std::max(off, std::abs(d[i * m + j]));
      }
    }
  }
  EXPECT_LT(off, 2e-4) << "NS output does not share the input's singular vectors";
  const MatD polar = testing::matmul(ref.u, ref.vt, m, m, n);
  double maxdev = 0.0;
  for (std::size_t i = 0; i < m; ++i) maxdev = std::max(maxdev, std::abs(d[i * m + i] - 1.0));
  // Frobenius distance to the polar factor is bounded by sqrt(m)·max|f(σ) − 1| (+ rounding).
  double dist = 0.0;
  for (std::size_t i = 0; i < m * n; ++i) dist += (od[i] - polar[i]) * (od[i] - polar[i]);
  EXPECT_LE(std::sqrt(dist), std::sqrt(static_cast<double>(m)) * maxdev + 1e-3);
}

TEST_P(NsParam, SingularValueBandsOnRandomIllConditionedAndRankDeficient) {
  const auto [set, variant] = GetParam();
  const Band band = band_for(set);
  for (const auto& [m, n] :
       std::vector<std::pair<std::size_t, std::size_t>>{{64, 64}, {64, 192}, {192, 64}}) {
    const std::size_t k = std::min(m, n);
    {  // random Gaussian
      const auto o = run_ns(testing::random_matrix(m, n, 3), m, n, set, variant);
      const auto s = svd(testing::to_double(o), m, n).s;
      print_band(("random " + std::to_string(m) + "x" + std::to_string(n)).c_str(), set, variant,
                 s);
      // A square Gaussian matrix has σ_min ~ 1/n of the norm (not converged): upper bound only.
      if (m != n) {
        EXPECT_GE(s.back(), band.lo);
      }
      EXPECT_LE(s.front(), band.hi);
    }
    {  // ill-conditioned: σ from 1 down to 1e-3 geometrically (κ = 1e3)
      const auto sin = geometric(k, 1.0, 1e-3);
      const auto o = run_ns(with_singular_values(m, n, sin, 5), m, n, set, variant);
      const auto s = svd(testing::to_double(o), m, n).s;
      print_band(("ill-cond 1e3 " + std::to_string(m) + "x" + std::to_string(n)).c_str(), set,
                 variant, s);
      EXPECT_LE(s.front(), band.hi_any);
      // The smallest normalised σ (≈ 1e-3/‖σ‖₂ ≈ 4e-4) is amplified by ∏aₖ: grown, not converged.
      EXPECT_GT(s.back(), band.lo_ill);
      EXPECT_LT(s.back(), band.lo);
    }
    {  // rank-deficient: rank k/2, equal nonzero σ
      std::vector<double> sin(k, 0.0);
      for (std::size_t i = 0; i < k / 2; ++i) sin[i] = 1.0 + static_cast<double>(i) / k;
      const auto o = run_ns(with_singular_values(m, n, sin, 9), m, n, set, variant);
      const auto s = svd(testing::to_double(o), m, n).s;
      print_band(("rank k/2 " + std::to_string(m) + "x" + std::to_string(n)).c_str(), set, variant,
                 std::vector<double>(s.begin(), s.begin() + k / 2));
      EXPECT_GE(s[k / 2 - 1], band.lo);
      EXPECT_LE(s.front(), band.hi);
      // The null space stays null: rounding-level values only (polynomial odd in σ).
      EXPECT_LT(s[k / 2], 1e-3);
    }
  }
}

TEST_P(NsParam, TallInputEqualsTransposeOfWideResult) {
  const auto [set, variant] = GetParam();
  const std::size_t m = 40, n = 136;
  const auto g = testing::random_matrix(m, n, 21);
  const auto wide = run_ns(g, m, n, set, variant);
  const auto tall = run_ns(testing::transpose_f(g, m, n), n, m, set, variant);
  // Same arithmetic up to BLAS summation order: relative error at fp32 rounding level times
  // the NS error amplification (measured ~1e-6).
  const double diff = testing::rel_diff(tall, testing::transpose_f(wide, m, n));
  std::printf("# tall vs transposed wide: relative difference %.2e\n", diff);
  EXPECT_LT(diff, 2e-5);
}

TEST_P(NsParam, DirectAndGramFormsAgree) {
  const auto [set, variant] = GetParam();
  if (variant == NsVariant::gram) GTEST_SKIP() << "covered by the direct instance";
  double worst = 0.0;
  for (const auto& [m, n] :
       std::vector<std::pair<std::size_t, std::size_t>>{{64, 256}, {256, 64}, {96, 96}, {33, 70}}) {
    const auto g = testing::random_matrix(m, n, 31);
    for (int steps : {1, 2, 3, 5, 8}) {
      const auto direct = run_ns(g, m, n, set, NsVariant::direct, steps);
      const auto gram = run_ns(g, m, n, set, NsVariant::gram, steps);
      // Exact arithmetic gives identical results. In fp32, R = XXᵀ carries relative rounding
      // ~m·2⁻²⁴ that the polynomial recursion in R amplifies by up to |p'| ≈ 3–8 per step
      // before the restart at step 2 resets it; measured differences are ≲ 3e-5. Bound 5e-4
      // (well below the ~0.1 spread of the singular values, so a wrong step order fails).
      const double diff = testing::rel_diff(gram, direct);
      worst = std::max(worst, diff);
      EXPECT_LT(diff, 5e-4) << m << "x" << n << " steps " << steps;
    }
  }
  std::printf("# direct vs gram (%s): max relative Frobenius difference %.2e\n",
              std::string(to_string(set)).c_str(), worst);
}

TEST_P(NsParam, ZeroMatrixStaysFiniteAndZero) {
  const auto [set, variant] = GetParam();
  const std::vector<float> g(24 * 40, 0.0f);
  for (const auto& [m, n] : std::vector<std::pair<std::size_t, std::size_t>>{{24, 40}, {40, 24}}) {
    const auto o = run_ns(g, m, n, set, variant);
    for (float v : o) ASSERT_EQ(v, 0.0f);
  }
}

INSTANTIATE_TEST_SUITE_P(AllForms, NsParam,
                         ::testing::Combine(::testing::Values(NsCoefficientSet::classic_muon,
                                                              NsCoefficientSet::polar_express),
                                            ::testing::Values(NsVariant::direct, NsVariant::gram)));

TEST(NewtonSchulz, MatchesDoubleReferenceOnSmallCase) {
  const std::size_t m = 5, n = 7;
  const auto g = testing::random_matrix(m, n, 2);
  const auto sched = ns_schedule(NsCoefficientSet::polar_express, 5);
  std::vector<std::array<double, 3>> co;
  for (const auto& c : sched) co.push_back({c.a, c.b, c.c});
  const auto ref = testing::ns_reference(testing::to_double(g), m, n, co);
  EXPECT_LT(
      testing::rel_diff(run_ns(g, m, n, NsCoefficientSet::polar_express, NsVariant::direct), ref),
      1e-5);
  const auto ref_t =
      testing::ns_reference(testing::to_double(testing::transpose_f(g, m, n)), n, m, co);
  EXPECT_LT(testing::rel_diff(run_ns(testing::transpose_f(g, m, n), n, m,
                                     NsCoefficientSet::polar_express, NsVariant::gram),
                              ref_t),
            1e-5);
}

TEST(NewtonSchulz, NonFiniteInputNamesTheParameter) {
  for (float bad : {std::nanf(""), INFINITY, -INFINITY}) {
    auto g = testing::random_matrix(8, 12, 1);
    g[17] = bad;
    g[90] = bad;
    host::NsWorkspace ws(8, 12);
    std::vector<float> out(g.size());
    try {
      host::newton_schulz(g.data(), out.data(), 8, 12, NsConfig{}, ws, "layers.3.mlp.w1");
      FAIL() << "no exception";
    } catch (const KernelError& e) {
      EXPECT_NE(std::string(e.what()).find("layers.3.mlp.w1"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("2 non-finite"), std::string::npos) << e.what();
    }
  }
}

TEST(NewtonSchulz, ShapeMismatchThrows) {
  host::NsWorkspace ws(8, 12);
  std::vector<float> g(12 * 8, 1.0f), out(g.size());
  EXPECT_THROW(host::newton_schulz(g.data(), out.data(), 12, 8, NsConfig{}, ws, "w"), KernelError);
  EXPECT_THROW(host::NsWorkspace(0, 3), KernelError);
  NsConfig cfg;
  cfg.steps = 0;
  EXPECT_THROW(host::newton_schulz(g.data(), out.data(), 8, 12, cfg, ws, "w"), KernelError);
}

TEST(NsWorkspace, BytesMoveAndReuse) {
  const std::size_t m = 24, n = 40;
  host::NsWorkspace ws(n, m);  // tall: 4 rows×cols buffers and 5 min²
  EXPECT_EQ(ws.bytes(), sizeof(float) * (4 * m * n + 5 * m * m));
  const auto g = testing::random_matrix(n, m, 8);
  std::vector<float> first(g.size()), again(g.size());
  NsConfig cfg;
  cfg.variant = NsVariant::gram;
  host::newton_schulz(g.data(), first.data(), n, m, cfg, ws, "w");
  // A moved workspace carries its buffers; the moved-from one is 0x0 and rejected.
  host::NsWorkspace moved(std::move(ws));
  EXPECT_EQ(moved.rows(), n);
  EXPECT_EQ(moved.cols(), m);
  EXPECT_EQ(ws.rows(), 0u);  // NOLINT(bugprone-use-after-move): documented state
  EXPECT_EQ(ws.bytes(), 0u);
  EXPECT_THROW(host::newton_schulz(g.data(), again.data(), n, m, cfg, ws, "w"), KernelError);
  // Reuse gives identical results (no state carried between calls), and out may alias g.
  host::newton_schulz(g.data(), again.data(), n, m, cfg, moved, "w");
  EXPECT_EQ(again, first);
  auto in_place = g;
  host::newton_schulz(in_place.data(), in_place.data(), n, m, cfg, moved, "w");
  EXPECT_EQ(in_place, first);
  host::NsWorkspace assigned(1, 1);
  assigned = std::move(moved);
  EXPECT_EQ(assigned.rows(), n);
  host::newton_schulz(g.data(), again.data(), n, m, cfg, assigned, "w");
  EXPECT_EQ(again, first);
}

TEST(NsCoefficients, SchedulesFollowSpec) {
  const auto classic = ns_schedule(NsCoefficientSet::classic_muon, 7);
  ASSERT_EQ(classic.size(), 7u);
  for (const auto& c : classic) {
    EXPECT_DOUBLE_EQ(c.a, 3.4445);
    EXPECT_DOUBLE_EQ(c.b, -4.7750);
    EXPECT_DOUBLE_EQ(c.c, 2.0315);
  }
  const auto pe = ns_schedule(NsCoefficientSet::polar_express, 7);
  EXPECT_NEAR(pe[0].a, 8.28721201814563 / 1.05, 1e-12);
  EXPECT_NEAR(pe[0].b, -23.595886519098837 / (1.05 * 1.05 * 1.05), 1e-12);
  EXPECT_NEAR(pe[0].c, 17.300387312530933 / std::pow(1.05, 5), 1e-12);
  EXPECT_NEAR(pe[4].a, 2.300652019954817 / 1.05, 1e-12);
  EXPECT_DOUBLE_EQ(pe[5].a, pe[4].a);  // past step 5 the last triple repeats
  EXPECT_DOUBLE_EQ(pe[6].c, pe[4].c);
  EXPECT_THROW(ns_schedule(NsCoefficientSet::classic_muon, 0), KernelError);
  EXPECT_DOUBLE_EQ(ns_direct_flops(1024, 4096, 5),
                   5.0 * (4.0 * 1024 * 1024 * 4096.0 + 2.0 * 1024.0 * 1024 * 1024));
}

}  // namespace
}  // namespace dmuon::kernels
