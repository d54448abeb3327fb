// FSDP2's copies in OpCost (project/op_cost.hpp) against hand-computed times: with FSDP2's
// rule (StepSpec::fsdp2, which the projection sets on a GPU machine) every gather of a sharded
// parameter also copies it out of the interleaved all-gather buffer and every backward copies
// its gradient into the reduce-scatter buffer (2w bytes per element each, at the memory-bound
// rate); without it (a CPU machine) and for replicated parameters nothing is copied.
//
// Machine: 100 GB/s, efficiencies 1, no overheads. One FSDP group of one parameter 10×100
// (1,000 elements) sharded over G = 2 (chunk 500), bf16 wire (w = 2):
//   pack      conversion 500·(4 + 2) = 3,000 B = 30 ns (fp32 parameters), copy-out 2·2·1,000 =
//   4,000 B = 40 ns backward  (no local samples) a memset 1,000·2 = 2,000 B = 20 ns, copy-in 4,000
//   B = 40 ns

#include <gtest/gtest.h>

#include "dmuon/engine/step/activation_work.hpp"
#include "dmuon/engine/step/engine_options.hpp"
#include "dmuon/engine/step/step_layout.hpp"
#include "dmuon/project/op_cost.hpp"
#include "test_machines.hpp"

namespace {

using namespace dmuon;

engine::StepLayout one_fsdp_group(engine::Storage storage) {
  engine::ParamLayout p;
  p.shape = {10, 100};
  p.numel = 1000;
  p.storage = storage;
  if (storage == engine::Storage::sharded) {
    p.chunk = 500;
    p.padded = 1000;
  }
  engine::StepLayout L;
  L.params = {p};
  engine::GroupLayout g;
  g.kind = engine::GroupKind::fsdp;
  g.members = {0};
  L.groups = {g};
  return L;
}

engine::EngineOptions bf16_wire(bool fsdp2) {
  engine::EngineOptions o;
  o.step.wire = kernels::Dtype::bf16;
  o.step.fsdp2 = fsdp2;
  return o;
}

TEST(OpCost, Fsdp2CopiesOnAGpu) {
  const auto gpu = project::testing::measured_machine(2, 10, 5, "gpu", 100);
  const project::OpCost cost(gpu, bf16_wire(true), 2);
  const auto L = one_fsdp_group(engine::Storage::sharded);
  EXPECT_NEAR(cost.pack(L, 0), 30e-9 + 40e-9, 1e-15);
  EXPECT_NEAR(cost.backward(L.params[0], 0), 20e-9 + 40e-9, 1e-15);
}

TEST(OpCost, NoCopiesOnACpuOrForReplicas) {
  const auto cpu = project::testing::measured_machine(2, 10, 5, "cpu", 100);
  const project::OpCost host(cpu, bf16_wire(false), 2);
  const auto L = one_fsdp_group(engine::Storage::sharded);
  EXPECT_NEAR(host.pack(L, 0), 30e-9, 1e-15);
  EXPECT_NEAR(host.backward(L.params[0], 0), 20e-9, 1e-15);
  const auto gpu = project::testing::measured_machine(2, 10, 5, "gpu", 100);
  const project::OpCost device(gpu, bf16_wire(true), 2);
  const auto R = one_fsdp_group(engine::Storage::replicated);
  EXPECT_NEAR(device.backward(R.params[0], 0), 20e-9, 1e-15);
}

// --param-dtype bf16: the master read by the pack and the optimizer's master and state traffic
// in 2 bytes. The same 500-element shard (p = 2, w = 2, g = 2): pack 500·(2 + 2) = 2,000 B =
// 20 ns (CPU: no copy-out); AdamW's apply of 500 state elements 500·(6·2 + 2) = 7,000 B =
// 70 ns against 500·(24 + 2) = 13,000 B = 130 ns with fp32 parameters.
TEST(OpCost, ParamDtypeNarrowsTheOptimizersTraffic) {
  const auto cpu = project::testing::measured_machine(2, 10, 5, "cpu", 100);
  auto L = one_fsdp_group(engine::Storage::sharded);
  L.params[0].state_elems = 500;
  const project::OpCost fp32(cpu, bf16_wire(false), 2);
  EXPECT_NEAR(fp32.apply(L.params[0], 0), 130e-9, 1e-15);
  auto o = bf16_wire(false);
  o.step.param = kernels::Dtype::bf16;
  const project::OpCost bf16(cpu, o, 2);
  EXPECT_NEAR(bf16.pack(L, 0), 20e-9, 1e-15);
  EXPECT_NEAR(bf16.apply(L.params[0], 0), 70e-9, 1e-15);
}

// A table the activation work looks up (an input embedding) runs no synthetic Linear: no
// forward GEMM, and its backward is the --compute none gradient fill, whatever the samples.
TEST(OpCost, ALookedUpTableRunsNoLinear) {
  const auto gpu = project::testing::measured_machine(2, 10, 5, "gpu", 100);
  auto L = one_fsdp_group(engine::Storage::replicated);
  L.params[0].pid = 0;
  auto gemm = bf16_wire(false);
  const project::OpCost plain(gpu, gemm, 2);
  EXPECT_GT(plain.forward(L.params[0], 64), 0);
  auto looked = gemm;
  auto work = std::make_shared<engine::ActivationWork>();
  work->lookup_params = {0};
  looked.step.activation = work;
  EXPECT_EQ(looked.step.compute_of(0), engine::Compute::none);
  EXPECT_EQ(looked.step.compute_of(1), engine::Compute::gemm);
  const project::OpCost lookup(gpu, looked, 2);
  EXPECT_EQ(lookup.forward(L.params[0], 64), 0);
  auto none = gemm;
  none.step.compute = engine::Compute::none;
  const project::OpCost fill(gpu, none, 2);
  EXPECT_DOUBLE_EQ(lookup.backward(L.params[0], 64), fill.backward(L.params[0], 64));
  EXPECT_LT(lookup.backward(L.params[0], 64), plain.backward(L.params[0], 64));
}

}  // namespace
