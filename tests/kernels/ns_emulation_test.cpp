// The CUDA Newton–Schulz numerics on the CPU (kernels/cuda/standalone/ns_emulation.hpp: the
// GPU's op sequence with its rounding points, no GPU needed), against an fp64 oracle: what
// cuda::ns_numerics picks for every storage type and requested form must stay within the
// bounds of docs/KERNELS.md ("Newton–Schulz numerics") on well- and ill-conditioned inputs —
// the product of two random square matrices (a gradient averaged over as many samples as it has
// columns: σ_min ≈ 0) and rank-deficient gradients. dmuon_cuda_check holds the GPU to the same
// bounds on the same kinds of input.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/cuda/ns_numerics.hpp"
#include "kernels/cuda/standalone/ns_emulation.hpp"

namespace dmuon::kernels {
namespace {

namespace emu = cuda::emulation;

struct Input {
  std::string name;
  std::size_t rows, cols;
  std::vector<float> g;
  bool rank_deficient;
};

std::vector<Input> inputs() {
  return {
      {"well-conditioned 64x192", 64, 192, emu::dyadic(64, 192, 7), false},
      {"well-conditioned tall 192x64", 192, 64, emu::dyadic(192, 64, 7), false},
      {"product of two random 128x128", 128, 128, emu::product(128, 128, 128, 11), false},
      {"product 64x64 . 64x192", 64, 192, emu::product(64, 64, 192, 13), false},
      {"rank 24 of 96x160", 96, 160, emu::product(96, 24, 160, 17), true},
      {"rank 24 of tall 160x96", 160, 96, emu::product(160, 24, 96, 19), true},
  };
}

/// ∏ a_k: how much the iteration amplifies a direction the input lacks (its odd polynomial's
/// slope at 0), where the rounding of X̃ puts something the oracle does not have.
double null_gain(const NsConfig& cfg) {
  double g = 1;
  for (const auto& co : ns_schedule(cfg.coefficients, cfg.steps)) g *= std::fabs(co.a);
  return g;
}

/// The bounds of docs/KERNELS.md, in units of the X type's u (what every step rounds X̃ to),
/// plus one rounding of the output when the X type is not the storage type. Full rank: c·u,
/// c from dmuon_ns_emulate's worst case on these inputs with a margin >= 2.4 — 16-bit X
/// (direct, or Gram with fp32 m×m matrices) measures <= 7.2u -> 24; fp32 with sequential fp32
/// accumulation <= 31u direct and <= 1700u Gram (R = X Xᵀ squares the condition) -> 128,
/// 4096. Rank-deficient: c·null_gain·u (the rounding in the missing directions grows by
/// null_gain) — measured <= 0.12 (16-bit), 0.66 (fp32 direct), 3.3 (fp32 Gram) -> 0.5, 2, 12.
double bound(const Input& in, const NsConfig& cfg, Dtype storage, const cuda::NsNumerics& num) {
  const bool f32 = num.x == Dtype::f32, direct = num.form == NsVariant::direct;
  double c = !f32 ? 24 : (direct ? 128 : 4096);
  if (in.rank_deficient) c = (!f32 ? 0.5 : (direct ? 2 : 12)) * null_gain(cfg);
  return c * emu::unit_roundoff(num.x) + (num.x != storage ? emu::unit_roundoff(storage) : 0.0);
}

/// A bound of 0.5 or more says nothing: a 16-bit NS of a rank-deficient input (bf16: ~0.3).
constexpr double kMeaningful = 0.5;

std::string describe(const Input& in, Dtype storage, NsVariant requested, NsCoefficientSet set,
                     const cuda::NsNumerics& num) {
  return in.name + ", " + std::string(dtype_name(storage)) + " storage, --ns " +
         std::string(to_string(requested)) + ", " + std::string(to_string(set)) + " -> " +
         std::string(to_string(num.form)) + " x=" + std::string(dtype_name(num.x)) +
         " gram=" + std::string(dtype_name(num.gram));
}

// The rule's choice for every storage type and requested form holds its bound on every input.
TEST(NsEmulation, RuleHoldsItsBoundOnIllConditionedInputs) {
  for (const Input& in : inputs()) {
    for (Dtype storage : {Dtype::f32, Dtype::bf16, Dtype::f16}) {
      for (NsVariant requested : {NsVariant::direct, NsVariant::gram}) {
        // Polar Express (the default) everywhere; classic Muon on the square product too.
        std::vector<NsCoefficientSet> sets = {NsCoefficientSet::polar_express};
        if (in.rows == in.cols) sets.push_back(NsCoefficientSet::classic_muon);
        for (NsCoefficientSet set : sets) {
          NsConfig cfg;
          cfg.coefficients = set;
          const cuda::NsNumerics num = cuda::ns_numerics(in.rows, in.cols, storage, requested);
          const double limit = bound(in, cfg, storage, num);
          if (limit >= kMeaningful) continue;
          const double err = emu::ns_error(in.g, in.rows, in.cols, cfg, storage, num,
                                           /*fp32_acc=*/num.x == Dtype::f32);
          EXPECT_LE(err, limit) << describe(in, storage, requested, set, num);
        }
      }
    }
  }
}

}  // namespace
}  // namespace dmuon::kernels
