// The compute model against times worked out by hand from compute_cost.hpp's formulas.

#include <gtest/gtest.h>

#include "dmuon/base/error.hpp"
#include "dmuon/project/compute_cost.hpp"
#include "test_machines.hpp"

namespace {

using namespace dmuon;
using kernels::Dtype;

project::Machine machine(const std::string& device, int sms, double bandwidth, double overhead) {
  return project::parse_machine(
      "name: hand\ndevice: " + device +
          "\nranks_per_node: 1\nnvlink_domain: 1\n"
          "compute:\n  peak_tflops: {fp32: 1, bf16: 8, fp16: 8}\n  gemm_efficiency: 1\n"
          "  sm_count: " +
          std::to_string(sms) + "\n  gemm_tile: [128, 128]\n  memory_bandwidth_GBps: " +
          std::to_string(bandwidth) + "\n  kernel_overhead_us: " + std::to_string(overhead) +
          "\nnetwork:\n  intra: {busbw_GBps: 1}\n",
      "test");
}

TEST(ComputeCost, GemmIsComputeOrMemoryBound) {
  const auto m = machine("gpu", 0, 100, 0);
  const project::ComputeCost c(m);
  // 1024³ fp32: 2·1024³ flops at 1 TFLOP/s (memory: 12.6 MB at 100 GB/s = 0.126 ms).
  EXPECT_NEAR(c.gemm(1024, 1024, 1024, Dtype::f32), 2.0 * 1024 * 1024 * 1024 / 1e12, 1e-12);
  // 8 × 4096 × 4096: 0.268 ms of flops but 67.4 MB of operands: memory-bound.
  EXPECT_NEAR(c.gemm(8, 4096, 4096, Dtype::f32), (8.0 * 4096 * 2 + 4096.0 * 4096) * 4 / 100e9,
              1e-12);
  EXPECT_EQ(c.gemm(0, 10, 10, Dtype::f32), 0);
}

TEST(ComputeCost, WaveQuantization) {
  // 4 SMs, 128×128 tiles: a 384×256 output is 6 tiles = 2 waves of 4 (75 % busy).
  const auto m = machine("gpu", 4, 100, 0);
  const project::ComputeCost c(m);
  EXPECT_NEAR(c.gemm(384, 256, 1024, Dtype::bf16), 2.0 * 384 * 256 * 1024 / (8e12 * 0.75), 1e-15);
  // 512×256 is 8 tiles = 2 full waves.
  EXPECT_NEAR(c.gemm(512, 256, 1024, Dtype::bf16), 2.0 * 512 * 256 * 1024 / 8e12, 1e-15);
}

TEST(ComputeCost, ElementwiseAndOverhead) {
  const auto m = machine("gpu", 0, 100, 2);
  const project::ComputeCost c(m);
  EXPECT_NEAR(c.elementwise(1e6), 2e-6 + 1e6 / 100e9, 1e-15);
  EXPECT_NEAR(c.gemm(1024, 1024, 1024, Dtype::f32), 2e-6 + 2.0 * 1024 * 1024 * 1024 / 1e12, 1e-12);
}

TEST(ComputeCost, NewtonSchulzDirectIsSpecFlops) {
  // SPEC §7: direct NS costs 4m²n + 2m³ flops per step (m = min, n = max). With unlimited
  // memory bandwidth both the host and the GPU sequence are exactly that at the peak.
  kernels::NsConfig cfg;
  cfg.variant = kernels::NsVariant::direct;
  const double m = 256, n = 1024, flops = 5 * (4 * m * m * n + 2 * m * m * m);
  for (const char* device : {"cpu", "gpu"}) {
    const auto mach = machine(device, 0, 1e9, 0);
    const project::ComputeCost c(mach);
    const Dtype t = std::string(device) == "cpu" ? Dtype::f32 : Dtype::f16;
    const double peak = std::string(device) == "cpu" ? 1e12 : 8e12;
    EXPECT_NEAR(c.newton_schulz(256, 1024, cfg, t, t), flops / peak, 1e-6 * flops / peak) << device;
    EXPECT_NEAR(c.newton_schulz(1024, 256, cfg, t, t), flops / peak, 1e-6 * flops / peak) << device;
  }
}

TEST(ComputeCost, NewtonSchulzGramFollowsTheCudaPlan) {
  // kernels/cuda/ns_plan.hpp run_gram, 5 steps, restart before step 2, m = 256 (4×4 blocks:
  // a symmetric product costs 5/8 of its GEMM): X Xᵀ twice (start, restart) = 2·(5/8)·2m²n,
  // Q·X twice = 2·2m²n, and 14 symmetric m×m products (steps 0..4: 3, 2, 3, 4, 2) =
  // 14·(5/8)·2m³. Host: SYRK (half a GEMM) for X Xᵀ, R², P²; full GEMMs for P²R and P·Q.
  kernels::NsConfig cfg;
  cfg.variant = kernels::NsVariant::gram;
  const double m = 256, n = 1024;
  const double gpu = 2 * 0.625 * 2 * m * m * n + 2 * 2 * m * m * n + 14 * 0.625 * 2 * m * m * m;
  const auto g = machine("gpu", 0, 1e9, 0);
  EXPECT_NEAR(project::ComputeCost(g).newton_schulz(256, 1024, cfg, Dtype::f16, Dtype::f16),
              gpu / 8e12, 1e-6 * gpu / 8e12);
  // Host: X Xᵀ 2·m²n; Q·X 2·2m²n; R² 5 SYRK = 5m³; P² 3 SYRK = 3m³ (steps 0, 2, 3);
  // P²·R 3 GEMMs = 6m³; P·Q 3 GEMMs (steps 1, 3, 4) = 6m³.
  const double host = 2 * m * m * n + 2 * 2 * m * m * n + (5 + 3 + 6 + 6) * m * m * m;
  const auto h = machine("cpu", 0, 1e9, 0);
  EXPECT_NEAR(project::ComputeCost(h).newton_schulz(256, 1024, cfg, Dtype::f32, Dtype::f32),
              host / 1e12, 1e-6 * host / 1e12);
}

// --compute-dtype fp8: the fp8 peak (16 TFLOP/s) at fp8_gemm_efficiency 0.5, with the same
// wave quantization, and 1-byte operands with a 2-byte (bf16) output on the memory side.
TEST(ComputeCost, Fp8GemmAtTheFp8Peak) {
  const auto m = project::parse_machine(
      "name: hand\ndevice: gpu\nranks_per_node: 1\nnvlink_domain: 1\n"
      "compute:\n  peak_tflops: {fp32: 1, bf16: 8, fp16: 8, fp8: 16}\n  gemm_efficiency: 1\n"
      "  fp8_gemm_efficiency: 0.5\n  sm_count: 4\n  gemm_tile: [128, 128]\n"
      "  memory_bandwidth_GBps: 100\nnetwork:\n  intra: {busbw_GBps: 1}\n",
      "test");
  const project::ComputeCost c(m);
  // 512×256: 8 tiles, 2 full waves: 2·512·256·1024 flops at 16 · 0.5 = 8 TFLOP/s = 33.554 µs.
  EXPECT_NEAR(c.gemm_fp8(512, 256, 1024), 2.0 * 512 * 256 * 1024 / 8e12, 1e-15);
  EXPECT_NEAR(c.gemm_fp8(512, 256, 1024), 33.554432e-6, 1e-12);
  // 384×256: 6 tiles in 2 waves of 4 (75 % busy).
  EXPECT_NEAR(c.gemm_fp8(384, 256, 1024), 2.0 * 384 * 256 * 1024 / (8e12 * 0.75), 1e-15);
  // 8 × 4096, k = 4096: 8·4096 + 4096·4096 fp8 bytes read, 8·4096·2 written at 100 GB/s.
  EXPECT_NEAR(c.gemm_fp8(8, 4096, 4096), (8.0 * 4096 + 4096.0 * 4096 + 2 * 8.0 * 4096) / 100e9,
              1e-15);
  EXPECT_EQ(c.gemm_fp8(0, 10, 10), 0);
}

TEST(ComputeCost, Fp8RefusedWithoutAnFp8Peak) {
  const auto m = machine("gpu", 0, 100, 0);
  const project::ComputeCost c(m);
  try {
    (void)c.gemm_fp8(128, 128, 128);
    FAIL() << "no fp8 peak: expected InputError";
  } catch (const InputError& err) {
    EXPECT_NE(std::string(err.what()).find("invalid on machine 'hand': it has no fp8 peak"),
              std::string::npos)
        << err.what();
  }
}

}  // namespace
