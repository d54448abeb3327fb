// Compute under communication (compute_contention.hpp): the GPU with SMs held by collectives,
// and the part of an op's time that scales with its SMs, against cases worked out by hand.

#include <gtest/gtest.h>

#include "dmuon/project/compute_contention.hpp"
#include "dmuon/project/compute_cost.hpp"

namespace {

using namespace dmuon;
using kernels::Dtype;

// 100 SMs, 128×128 tiles, 8 TFLOP/s bf16, memory fast enough never to bound a GEMM here,
// collectives holding 20 SMs on NVLink and 12 across nodes.
project::Machine machine() {
  return project::parse_machine(
      "name: hand\ndevice: gpu\nranks_per_node: 8\nnvlink_domain: 8\n"
      "compute:\n  peak_tflops: {fp32: 1, bf16: 8, fp16: 8}\n  gemm_efficiency: 1\n"
      "  sm_count: 100\n  gemm_tile: [128, 128]\n  memory_bandwidth_GBps: 1e6\n"
      "network:\n  intra: {busbw_GBps: 100, collective_sms: 20}\n"
      "  inter: {busbw_GBps: 10, collective_sms: 12}\n",
      "test");
}

TEST(ComputeContention, TheHeldGpuHasFewerSmsAndProportionalPeaks) {
  const auto m = machine();
  EXPECT_EQ(project::reference_held_sms(m), 20);  // the larger of the two levels
  const auto h = project::with_sms_held(m, 20);
  EXPECT_EQ(h.compute.sm_count, 80);
  EXPECT_DOUBLE_EQ(h.compute.peak_flops(Dtype::bf16), 6.4e12);
  EXPECT_DOUBLE_EQ(h.compute.peak_flops(Dtype::f32), 0.8e12);
  EXPECT_DOUBLE_EQ(h.compute.memory_bandwidth_gbps, m.compute.memory_bandwidth_gbps);
  EXPECT_THROW((void)project::with_sms_held(m, 100), std::logic_error);
  EXPECT_THROW((void)project::with_sms_held(m, 0), std::logic_error);
}

TEST(ComputeContention, AOneWaveGemmTakesTwiceAsLongWithAFifthOfTheSmsHeld) {
  // 1280 × 1280 output = 100 tiles: one full wave of 100 SMs; with 80 SMs, two waves, the
  // second a quarter full (the tail effect NCCL's CTAs cause, NVIDIA developer forum): twice
  // the time. Its sm_seconds then give back that time at 20 held, and 5/3 as much at 40.
  const auto m = machine();
  const auto h = project::with_sms_held(m, 20);
  const double alone = project::ComputeCost(m).gemm(1280, 1280, 4096, Dtype::bf16);
  const double held = project::ComputeCost(h).gemm(1280, 1280, 4096, Dtype::bf16);
  EXPECT_NEAR(alone, 2.0 * 1280 * 1280 * 4096 / 8e12, 1e-15);
  EXPECT_NEAR(held, 2 * alone, 1e-15);
  const double sm = project::sm_seconds(alone, held, 100, 20);
  EXPECT_NEAR(sm, 4 * alone, 1e-15);  // (2 − 1) · alone · 80 / 20
  EXPECT_NEAR(project::contended_seconds(alone, sm, 100, 20), held, 1e-15);
  EXPECT_NEAR(project::contended_seconds(alone, sm, 100, 40), alone + sm * 40 / 60, 1e-15);
  EXPECT_EQ(project::contended_seconds(alone, sm, 100, 0), alone);
}

TEST(ComputeContention, MemoryBoundKernelsKeepTheirTime) {
  const auto m = machine();
  const auto h = project::with_sms_held(m, 20);
  const double alone = project::ComputeCost(m).elementwise(1e9);
  EXPECT_EQ(project::ComputeCost(h).elementwise(1e9), alone);
  EXPECT_EQ(project::sm_seconds(alone, alone, 100, 20), 0);
}

TEST(ComputeContention, NoneOnCpusOrWithoutTheKey) {
  auto m = machine();
  m.intra.collective_sms = m.inter.collective_sms = 0;
  EXPECT_EQ(project::reference_held_sms(m), 0);
  m.intra.collective_sms = 20;
  m.device = project::DeviceKind::cpu;
  EXPECT_EQ(project::reference_held_sms(m), 0);
}

}  // namespace
