// The CUDA Newton–Schulz numerics on the CPU (kernels/cuda/standalone/ns_emulation.hpp: the
// GPU's op sequence with its rounding points, no GPU needed), against an fp64 oracle: what
// cuda::ns_numerics picks for every storage type and requested form must stay within the
// bounds of docs/KERNELS.md ("Newton–Schulz numerics", emulation::ns_error_bound) on well- and
// ill-conditioned inputs — the product of two random square matrices (a gradient averaged over
// as many samples as it has columns: σ_min ≈ 0) and rank-deficient gradients. dmuon_cuda_check
// holds the GPU to the same bounds on the same kinds of input (and on the engine's own step-1
// inputs; tests/device/gpu_step_emulation_test.cpp emulates those).
#include <gtest/gtest.h>

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
      {"product 32x32 . 32x640 (Gram by the rule)", 32, 640, emu::product(32, 32, 640, 23), false},
      {"rank 24 of 96x160", 96, 160, emu::product(96, 24, 160, 17), true},
      {"rank 24 of tall 160x96", 160, 96, emu::product(160, 24, 96, 19), true},
  };
}

std::string describe(const Input& in, Dtype storage, NsCoefficientSet set,
                     const cuda::NsNumerics& num) {
  return in.name + ", " + std::string(dtype_name(storage)) + " storage, " +
         std::string(to_string(set)) + ": " + std::string(to_string(num.form)) +
         " x=" + std::string(dtype_name(num.x)) + " gram=" + std::string(dtype_name(num.gram));
}

/// Expects the emulated error of `num` within its bound, where that bound says something.
/// Returns whether it was checked.
bool expect_within_bound(const Input& in, Dtype storage, NsCoefficientSet set,
                         const cuda::NsNumerics& num) {
  NsConfig cfg;
  cfg.coefficients = set;
  const double limit = emu::ns_error_bound(cfg, storage, num, in.rank_deficient);
  if (limit >= emu::kMeaningfulBound) return false;
  const double err = emu::ns_error(in.g, in.rows, in.cols, cfg, storage, num,
                                   /*fp32_acc=*/num.x == Dtype::f32);
  EXPECT_LE(err, limit) << describe(in, storage, set, num);
  return true;
}

// The rule's choice for every storage type and requested form holds its bound on every input.
TEST(NsEmulation, RuleHoldsItsBoundOnIllConditionedInputs) {
  int checked = 0;
  for (const Input& in : inputs()) {
    for (Dtype storage : {Dtype::f32, Dtype::bf16, Dtype::f16}) {
      for (NsVariant requested : {NsVariant::direct, NsVariant::gram}) {
        // Polar Express (the default) everywhere; classic Muon on the square product too.
        std::vector<NsCoefficientSet> sets = {NsCoefficientSet::polar_express};
        if (in.rows == in.cols) sets.push_back(NsCoefficientSet::classic_muon);
        for (NsCoefficientSet set : sets)
          checked += expect_within_bound(in, storage, set,
                                         cuda::ns_numerics(in.rows, in.cols, storage, requested));
      }
    }
  }
  // 48 cases; only bf16 NS of the two rank-deficient inputs (4) has no meaningful bound.
  EXPECT_EQ(checked, 44);
}

// The Gram form with fp32 m×m matrices, which the kernel check forces on every shape, holds the
// same bounds wherever it runs (the rule picks it for n >= 19m only).
TEST(NsEmulation, GramWithFp32MatricesHoldsTheBoundOnEveryShape) {
  for (const Input& in : inputs())
    for (Dtype storage : {Dtype::bf16, Dtype::f16})
      expect_within_bound(in, storage, NsCoefficientSet::polar_express,
                          {NsVariant::gram, Dtype::f16, Dtype::f32});
}

// Why the rule never keeps the Gram matrices in 16 bits: on a gradient averaged over as many
// samples as it has columns, R = X Xᵀ in fp16 loses the small singular values (emulated 1.2e-1
// against a bound of 1.2e-2).
TEST(NsEmulation, Fp16GramMatricesLoseTheSmallSingularValues) {
  const Input in = inputs()[2];
  NsConfig cfg;
  const cuda::NsNumerics fp16_gram{NsVariant::gram, Dtype::f16, Dtype::f16};
  const double err = emu::ns_error(in.g, in.rows, in.cols, cfg, Dtype::f16, fp16_gram);
  EXPECT_GT(err, 2 * emu::ns_error_bound(cfg, Dtype::f16, fp16_gram, false));
}

TEST(NsEmulation, RuleFollowsShapeAndStorage) {
  using cuda::ns_numerics;
  using cuda::NsNumerics;
  const auto gram = NsVariant::gram, direct = NsVariant::direct;
  EXPECT_EQ(ns_numerics(128, 128, Dtype::f32, gram), (NsNumerics{gram, Dtype::f32, Dtype::f32}));
  EXPECT_EQ(ns_numerics(128, 128, Dtype::f32, direct),
            (NsNumerics{direct, Dtype::f32, Dtype::f32}));
  EXPECT_EQ(ns_numerics(4096, 14336, Dtype::bf16, gram),
            (NsNumerics{direct, Dtype::bf16, Dtype::bf16}));
  EXPECT_EQ(ns_numerics(18 * 64, 64, Dtype::f16, gram),
            (NsNumerics{direct, Dtype::f16, Dtype::f16}));
  EXPECT_EQ(ns_numerics(19 * 64, 64, Dtype::f16, gram), (NsNumerics{gram, Dtype::f16, Dtype::f32}));
  EXPECT_EQ(ns_numerics(64, 19 * 64, Dtype::bf16, gram),
            (NsNumerics{gram, Dtype::f16, Dtype::f32}));
  EXPECT_EQ(ns_numerics(64, 19 * 64, Dtype::bf16, direct),
            (NsNumerics{direct, Dtype::bf16, Dtype::bf16}));
}

}  // namespace
}  // namespace dmuon::kernels
