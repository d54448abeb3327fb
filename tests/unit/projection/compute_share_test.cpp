// Ranks sharing fewer cores (compute.cores, calibrated CPU machines) and the calibration's
// latency–bandwidth fit, against values worked out by hand.

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "dmuon/base/error.hpp"
#include "dmuon/project/compute_cost.hpp"
#include "dmuon/project/latency_fit.hpp"
#include "dmuon/project/machine_model.hpp"

namespace {

using namespace dmuon;
using kernels::Dtype;

// A CPU node of `ranks` ranks on `cores` cores (no key when cores is 0): 1 TFLOP/s fp32,
// 100 GB/s, 2 µs per kernel.
project::Machine node(int ranks, int cores) {
  std::string y = "name: shared\ndevice: cpu\nranks_per_node: " + std::to_string(ranks) +
                  "\nnvlink_domain: " + std::to_string(ranks) +
                  "\ncompute:\n  peak_tflops: {fp32: 1}\n  gemm_efficiency: 1\n"
                  "  memory_bandwidth_GBps: 100\n  kernel_overhead_us: 2\n";
  if (cores > 0) y += "  cores: " + std::to_string(cores) + "\n";
  y += "network:\n  intra: {busbw_GBps: 1}\n";
  return project::parse_machine(y, "test");
}

TEST(ComputeShare, RanksOverCoresOnOneNode) {
  EXPECT_DOUBLE_EQ(project::compute_share(node(4, 2), 4), 2.0);  // 4 ranks, 2 cores
  EXPECT_DOUBLE_EQ(project::compute_share(node(4, 2), 3), 1.5);  // 3 of them in the world
  EXPECT_DOUBLE_EQ(project::compute_share(node(4, 2), 2), 1.0);  // one core each
  EXPECT_DOUBLE_EQ(project::compute_share(node(4, 2), 1), 1.0);
  EXPECT_DOUBLE_EQ(project::compute_share(node(4, 8), 4), 1.0);  // more cores than ranks
  EXPECT_DOUBLE_EQ(project::compute_share(node(3, 2), 8), 1.5);  // a node holds 3 ranks
  // No cores key (GPUs, the shipped files): every rank has its own device, as before.
  EXPECT_DOUBLE_EQ(project::compute_share(node(8, 0), 8), 1.0);
}

TEST(ComputeShare, EveryKernelTakesShareTimesItsTime) {
  const auto m = node(4, 2);
  const project::ComputeCost alone(m), shared(m, project::compute_share(m, 4));
  // 1024³ fp32 at 1 TFLOP/s + 2 µs, twice.
  const double gemm = 2e-6 + 2.0 * 1024 * 1024 * 1024 / 1e12;
  EXPECT_NEAR(alone.gemm(1024, 1024, 1024, Dtype::f32), gemm, 1e-15);
  EXPECT_NEAR(shared.gemm(1024, 1024, 1024, Dtype::f32), 2 * gemm, 1e-15);
  // 1 MB streamed at 100 GB/s + 2 µs = 12 µs, twice.
  EXPECT_NEAR(shared.elementwise(1e6), 2 * 12e-6, 1e-15);
  // The synthetic draw of 1e6 fp32 (memory-bound without a draw rate): 2 + 40 µs, twice.
  EXPECT_NEAR(shared.synthetic(1000000, Dtype::f32), 2 * 42e-6, 1e-15);
  // Newton–Schulz is its kernels: exactly twice as well.
  kernels::NsConfig cfg;
  cfg.variant = kernels::NsVariant::direct;
  EXPECT_NEAR(shared.newton_schulz(256, 512, cfg, Dtype::f32, Dtype::f32),
              2 * alone.newton_schulz(256, 512, cfg, Dtype::f32, Dtype::f32), 1e-12);
  // A share below 1 is no speed-up.
  EXPECT_NEAR(project::ComputeCost(m, 0.5).elementwise(1e6), 12e-6, 1e-15);
}

TEST(ComputeShare, MachineFilesCarryCores) {
  EXPECT_EQ(node(4, 2).compute.cores, 2);
  EXPECT_EQ(node(4, 0).compute.cores, 0);
  // Written and read back.
  const auto back = project::parse_machine(project::to_yaml(node(4, 2)), "back");
  EXPECT_EQ(back.compute.cores, 2);
  EXPECT_EQ(project::to_yaml(node(4, 0)).find("cores"), std::string::npos);
  // cores must be a positive integer.
  for (const char* bad : {"0", "-1", "1.5", "two"}) {
    std::string y = project::to_yaml(node(4, 2));
    y.replace(y.find("cores: 2"), 8, std::string("cores: ") + bad);
    try {
      (void)project::parse_machine(y, "m.yaml");
      ADD_FAILURE() << "cores: " << bad << " accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("compute.cores"), std::string::npos) << e.what();
    }
  }
}

TEST(LatencyFit, RecoversAnExactLine) {
  // t = 5 µs + x / 2 GB/s at 1 KB ... 4 MB.
  std::vector<double> x, t;
  for (double s = 1024; s <= 4194304; s *= 4) {
    x.push_back(s);
    t.push_back(5e-6 + s / 2e9);
  }
  const auto f = project::fit_latency_bandwidth(x, t);
  EXPECT_NEAR(f.latency_s, 5e-6, 1e-12);
  EXPECT_NEAR(f.bandwidth, 2e9, 1e-3);
}

TEST(LatencyFit, NegativeInterceptIsClampedAndTheSlopeRefitted) {
  // Through (1, 1) and (2, 3) the line is t = −1 + 2x; clamped: slope = Σ w x t / Σ w x² with
  // w = 1/t²: (1 + 6/9) / (1 + 4/9) = 15/13, bandwidth 13/15.
  const auto f = project::fit_latency_bandwidth({1, 2}, {1, 3});
  EXPECT_DOUBLE_EQ(f.latency_s, 0);
  EXPECT_NEAR(f.bandwidth, 13.0 / 15.0, 1e-12);
}

TEST(LatencyFit, OneSlowPointMovesTheRelativeFitLessThanTwoPoints) {
  // Seven sizes on t = 1 µs + x / 1 GB/s, the 4 MB point 10× slow (a transfer that left the
  // cache). Through the end points alone: (4194304 − 1024) B / (41.95 ms − 0.002 ms) ≈ 0.1 GB/s.
  std::vector<double> x, t;
  for (double s = 1024; s <= 4194304; s *= 4) {
    x.push_back(s);
    t.push_back(1e-6 + s / 1e9);
  }
  t.back() *= 10;
  const double two_point = (x.back() - x.front()) / (t.back() - t.front());
  EXPECT_LT(two_point, 0.11e9);
  const auto f = project::fit_latency_bandwidth(x, t);
  EXPECT_GT(f.bandwidth, 3 * two_point);
}

TEST(LatencyFit, RejectsDegenerateInput) {
  EXPECT_THROW(project::fit_latency_bandwidth({1}, {1}), std::invalid_argument);
  EXPECT_THROW(project::fit_latency_bandwidth({1, 1}, {1, 2}), std::invalid_argument);
  EXPECT_THROW(project::fit_latency_bandwidth({1, 2}, {1, 0}), std::invalid_argument);
  EXPECT_THROW(project::fit_latency_bandwidth({1, 2}, {2, 1}), std::invalid_argument);
}

}  // namespace
