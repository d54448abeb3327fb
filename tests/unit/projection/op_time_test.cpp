// The step work's cost on a machine: the machine files' new keys (parsed, validated, written
// back; every shipped value with a source comment) and OpTime against hand-computed times on a
// machine with round numbers; MFU / HFU helpers.

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "dmuon/base/error.hpp"
#include "dmuon/model/topology.hpp"
#include "dmuon/project/collective_cost.hpp"
#include "dmuon/project/compute_cost.hpp"
#include "dmuon/project/machine_model.hpp"
#include "dmuon/project/op_time.hpp"
#include "dmuon/project/op_totals.hpp"
#include "dmuon/work/attention_ops.hpp"
#include "dmuon/work/flop_convention.hpp"
#include "dmuon/work/gemm_ops.hpp"
#include "dmuon/work/memory_ops.hpp"
#include "dmuon/work/step_work.hpp"
#include "dmuon/work/throughput.hpp"

namespace {

using namespace dmuon;
using namespace dmuon::work;
using dmuon::project::OpTime;
using dmuon::project::peak_flops;
using project::parse_machine;

// bf16 peak 100 TFLOP/s, fp32 10; HBM 1000 GB/s; attention at 50 % forward, 40 % backward;
// memory-bound kernels at 80 %; 2 µs per kernel on the device, 5 µs to launch one.
const std::string kHand =
    "name: hand\n"
    "device: gpu\n"
    "ranks_per_node: 8\n"
    "nvlink_domain: 8\n"
    "compute:\n"
    "  peak_tflops: {fp32: 10, bf16: 100, fp16: 100}\n"
    "  gemm_efficiency: 1\n"
    "  memory_bandwidth_GBps: 1000\n"
    "  kernel_overhead_us: 2\n"
    "  attention_efficiency: {forward: 0.5, backward: 0.4}\n"
    "  memory_bound_efficiency: 0.8\n"
    "  launch_us: 5\n"
    "network:\n"
    "  intra: {busbw_GBps: 100}\n";

std::string replace(std::string s, const std::string& from, const std::string& to) {
  const auto at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

std::string error_of(const std::string& text) {
  try {
    (void)parse_machine(text, "m.yaml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(MachineStepKeys, ParsedValidatedWrittenBack) {
  const auto m = parse_machine(kHand, "m.yaml");
  EXPECT_DOUBLE_EQ(m.compute.attention_forward_efficiency, 0.5);
  EXPECT_DOUBLE_EQ(m.compute.attention_backward_efficiency, 0.4);
  EXPECT_DOUBLE_EQ(m.compute.memory_bound_efficiency, 0.8);
  EXPECT_DOUBLE_EQ(m.compute.launch_us, 5);
  const auto back = parse_machine(project::to_yaml(m), "w.yaml");
  EXPECT_DOUBLE_EQ(back.compute.attention_backward_efficiency, 0.4);
  EXPECT_DOUBLE_EQ(back.compute.memory_bound_efficiency, 0.8);
  EXPECT_DOUBLE_EQ(back.compute.launch_us, 5);
  // Absent: no attention efficiency, memory-bound = memory_efficiency, no launch floor.
  std::string plain = replace(kHand, "  attention_efficiency: {forward: 0.5, backward: 0.4}\n", "");
  plain = replace(plain, "  memory_bound_efficiency: 0.8\n", "  memory_efficiency: 0.7\n");
  plain = replace(plain, "  launch_us: 5\n", "");
  const auto p = parse_machine(plain, "m.yaml");
  EXPECT_EQ(p.compute.attention_forward_efficiency, 0);
  EXPECT_DOUBLE_EQ(p.compute.memory_bound_efficiency, 0.7);
  EXPECT_EQ(p.compute.launch_us, 0);
  struct Case {
    std::string text, expect;
  };
  const Case cases[] = {
      {replace(kHand, "forward: 0.5", "forward: 1.5"),
       "m.yaml:10: compute.attention_efficiency.forward is 1.5 \\(valid: 0.001..1\\)"},
      {replace(kHand, ", backward: 0.4", ""), "compute.attention_efficiency has no 'backward'"},
      {replace(kHand, "backward: 0.4", "bwd: 0.4"),
       "unknown key 'bwd' in compute.attention_efficiency \\(valid keys: forward, backward\\)"},
      {replace(kHand, "memory_bound_efficiency: 0.8", "memory_bound_efficiency: 0"),
       "compute.memory_bound_efficiency is 0 \\(valid: 0.001..1\\)"},
      {replace(kHand, "launch_us: 5", "launch_us: -1"), "compute.launch_us is -1"},
  };
  for (const auto& c : cases) {
    const std::string e = error_of(c.text);
    EXPECT_TRUE(std::regex_search(e, std::regex(c.expect)))
        << "got: " << e << "\nwant: " << c.expect;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
}

TEST(MachineStepKeys, ShippedGpuMachinesCarryThemWithSources) {
  for (const char* name :
       {"a800", "a100-80gb", "h100-ndr", "h100-96gb-500w", "h200", "gb200-nvl72"}) {
    const auto m = project::load_machine(name, DMUON_MACHINES_DIR);
    EXPECT_EQ(m.name, name);
    EXPECT_GT(m.compute.attention_forward_efficiency, 0) << name;
    EXPECT_GT(m.compute.attention_backward_efficiency, 0) << name;
    EXPECT_GT(m.compute.launch_us, 0) << name;
    EXPECT_GT(m.compute.memory_bound_efficiency, 0) << name;
    std::istringstream in(m.text);
    int line_no = 0;
    for (std::string line; std::getline(in, line);) {
      ++line_no;
      if (line.empty() || line[0] == '#') continue;
      if (std::regex_search(line, std::regex("^\\s*[A-Za-z_0-9]+:\\s*[0-9\\[{]"))) {
        EXPECT_NE(line.find('#'), std::string::npos) << name << ":" << line_no << ": " << line;
      }
    }
  }
}

constexpr double e = 2;

TEST(OpTime, AttentionAtTheKernelEfficiency) {
  const auto m = parse_machine(kHand, "m.yaml");
  const OpTime t(m, kernels::Dtype::bf16);
  const AttentionShape a{2, 1024, 8, 8, 128, 128, true};
  const auto p = fused_attention_ops(a, e);
  // Forward: 2·S·256 FLOPs, S = 2·8·1024²/2, at 50 TFLOP/s, + one 2 µs kernel.
  const double S = 2.0 * 8 * 1024 * 1024 / 2;
  EXPECT_NEAR(t.seconds(p.forward[0]), 2 * S * 256 / 50e12 + 2e-6, 1e-15);
  // Backward: the benchmarks' 2.5x the forward FLOPs at 40 TFLOP/s, + three kernels.
  EXPECT_NEAR(t.seconds(p.backward[0]), 2.5 * 2 * S * 256 / 40e12 + 6e-6, 1e-15);
  // Causal halves the time of the arithmetic.
  const auto full = fused_attention_ops({2, 1024, 8, 8, 128, 128, false}, e);
  EXPECT_NEAR(t.seconds(full.forward[0]) - 2e-6, 2 * (t.seconds(p.forward[0]) - 2e-6), 1e-15);
  // Without the key a GPU cannot cost attention.
  const auto bare = parse_machine(
      replace(kHand, "  attention_efficiency: {forward: 0.5, backward: 0.4}\n", ""), "m.yaml");
  EXPECT_THROW((void)OpTime(bare, kernels::Dtype::bf16).seconds(p.forward[0]), InputError);
}

TEST(OpTime, AttentionKernelTheRunNames) {
  const std::string with = replace(kHand, "  memory_bound_efficiency: 0.8\n",
                                   "  attention_kernels:\n"
                                   "    fast: {forward: 0.8, backward: 0.6}\n"
                                   "  memory_bound_efficiency: 0.8\n");
  const auto m = parse_machine(with, "m.yaml");
  const AttentionShape a{2, 1024, 8, 8, 128, 128, true};
  const auto p = fused_attention_ops(a, e);
  const double S = 2.0 * 8 * 1024 * 1024 / 2;
  // "default": the machine's attention_efficiency (50 % / 40 %), as without the option.
  const auto plain = project::with_attention_kernel(m, project::kDefaultAttentionKernel);
  EXPECT_NEAR(OpTime(plain, kernels::Dtype::bf16).seconds(p.forward[0]), 2 * S * 256 / 50e12 + 2e-6,
              1e-15);
  // "fast": 80 TFLOP/s forward, 60 backward (2.5x the forward FLOPs), the same kernels.
  const auto fast = project::with_attention_kernel(m, "fast");
  const OpTime t(fast, kernels::Dtype::bf16);
  EXPECT_NEAR(t.seconds(p.forward[0]), 2 * S * 256 / 80e12 + 2e-6, 1e-15);
  EXPECT_NEAR(t.seconds(p.backward[0]), 2.5 * 2 * S * 256 / 60e12 + 6e-6, 1e-15);
  // Written back by to_yaml (what --calibrate and results files carry).
  const auto back = parse_machine(project::to_yaml(m), "w.yaml");
  ASSERT_EQ(back.compute.attention_kernels.count("fast"), 1u);
  EXPECT_DOUBLE_EQ(back.compute.attention_kernels.at("fast").second, 0.6);
  // A kernel the machine does not list is refused with the ones it does.
  try {
    (void)project::with_attention_kernel(m, "slow");
    ADD_FAILURE() << "no InputError";
  } catch (const InputError& err) {
    EXPECT_NE(std::string(err.what())
                  .find("--attention-kernel slow: machine 'hand' gives no rates for it (valid: "
                        "default, fast;"),
              std::string::npos)
        << err.what();
  }
  // Bad files: a rate out of range, the default's name, kernels without the default.
  const std::string no_default =
      replace(with, "  attention_efficiency: {forward: 0.5, backward: 0.4}\n", "");
  const std::pair<std::string, std::string> cases[] = {
      {replace(with, "forward: 0.8", "forward: 1.8"),
       "compute.attention_kernels.fast.forward is 1.8 \\(valid: 0.001..1\\)"},
      {replace(with, "    fast:", "    default:"), "'default' names attention_efficiency"},
      {replace(with, "    fast:", "    \"\":"), "a kernel's name must be a word"},
      {replace(with, "    fast:", "    ? [a, b]\n    :"), "a kernel's name must be a word"},
      {no_default, "compute.attention_kernels needs compute.attention_efficiency"},
      {replace(with, "    fast: {forward: 0.8, backward: 0.6}", "    fast: 0.8"),
       "compute.attention_kernels.fast must be a mapping"},
  };
  for (const auto& [text, expect] : cases) {
    const std::string got = error_of(text);
    EXPECT_TRUE(std::regex_search(got, std::regex(expect))) << "got: " << got;
  }
}

TEST(OpTime, MemoryBoundOpsAtBandwidthWithLaunchFloor) {
  const auto m = parse_machine(kHand, "m.yaml");
  const OpTime t(m, kernels::Dtype::bf16);
  // 1M rows x 1024 RMSNorm, fused: read N·e + W·e, write N·e + R·4, at 800 GB/s, + 2 µs.
  const double R = 1 << 20, W = 1024, N = R * W;
  const auto norm = norm_ops(model::NormKind::rms, R, W, e, Fusion::fused);
  EXPECT_NEAR(t.seconds(norm.forward[0]), (2 * N * e + W * e + R * 4) / 800e9 + 2e-6, 1e-12);
  // A tiny op is launch-bound: 8 eager kernels of a 1x4 norm take 8 x 5 µs.
  const auto tiny = norm_ops(model::NormKind::rms, 1, 4, e, Fusion::eager);
  EXPECT_DOUBLE_EQ(t.seconds(tiny.forward[0]), 8 * 5e-6);
  // Arithmetic-bound when vector FLOPs outweigh bytes (fp32 peak 10 TFLOP/s).
  const Op heavy = memory_op("x", 1e3, 0, 1e9, 1);
  EXPECT_NEAR(t.seconds(heavy), 1e9 / 10e12 + 2e-6, 1e-15);
}

TEST(OpTime, GemmsUseTheComputeCostModel) {
  const auto m = parse_machine(kHand, "m.yaml");
  const OpTime t(m, kernels::Dtype::bf16);
  const project::ComputeCost cost(m);
  const auto one = linear_ops(4096, 4096, 1024, 1, false, e);
  EXPECT_DOUBLE_EQ(t.seconds(one.forward[0]), cost.gemm(4096, 1024, 4096, kernels::Dtype::bf16));
  EXPECT_DOUBLE_EQ(t.seconds(one.backward[1]), cost.gemm(1024, 4096, 4096, kernels::Dtype::bf16));
  // 16 experts in one grouped kernel: compute-bound at 128 tokens each, the GEMM of the
  // 2048 stacked rows (2·2048·1024·4096 FLOPs at 100 TFLOP/s, + 2 µs)...
  const auto grouped = linear_ops(128, 4096, 1024, 16, false, e);
  EXPECT_DOUBLE_EQ(t.seconds(grouped.forward[0]),
                   cost.gemm(2048, 1024, 4096, kernels::Dtype::bf16));
  EXPECT_NEAR(t.seconds(grouped.forward[0]), 2.0 * 2048 * 1024 * 4096 / 100e12 + 2e-6, 1e-15);
  // ... memory-bound at 8 tokens each: every expert's 4096x1024 weight is read (1000 GB/s).
  const auto thin = linear_ops(8, 4096, 1024, 16, false, e);
  EXPECT_NEAR(t.seconds(thin.forward[0]),
              16 * (8 * 4096 + 4096 * 1024 + 8 * 1024) * e / 1e12 + 2e-6, 1e-15);
}

TEST(OpTime, CpuMachinesRunTheUnfusedAttention) {
  const auto m = parse_machine(replace(kHand, "device: gpu", "device: cpu"), "m.yaml");
  const OpTime t(m, kernels::Dtype::f32);
  const AttentionShape a{1, 256, 4, 4, 64, 64, true};
  const auto p = fused_attention_ops(a, 4);
  double parts = 0;
  for (const auto& op : unfused_attention_ops(a, 4, Phase::forward)) parts += t.seconds(op);
  EXPECT_DOUBLE_EQ(t.seconds(p.forward[0]), parts);
  // QKᵀ at its full 256x256 shape, 4 heads in one launch: 2·4·256·256·64 FLOPs at the fp32
  // peak (10 TFLOP/s) against 4 heads' Q, K and scores at 1000 GB/s: compute-bound.
  const auto qk = unfused_attention_ops(a, 4, Phase::forward)[0];
  EXPECT_NEAR(t.seconds(qk), 2.0 * 4 * 256 * 256 * 64 / 10e12 + 2e-6, 1e-15);
}

TEST(OpTime, CpCollectivesShowOnlyWhatTheirSubCallDoesNotHide) {
  const auto m = parse_machine(kHand, "m.yaml");
  const OpTime t(m, kernels::Dtype::bf16);
  // A ring permute of 1e8 fp32 elements: a 2-rank exchange on the NVLink domain.
  GroupCall call{comm::CollectiveKind::all_gather, 1e8, 4, 2, 8, 0};
  const double transfer =
      project::collective_time(m, comm::CollectiveKind::all_gather, 100000000, 4, {2, 1}).total_s();
  ASSERT_GT(transfer, 2e-3);
  Op op = cp_collective_op("cp_dkv_permute", call);
  op.phase = Phase::backward;
  EXPECT_DOUBLE_EQ(t.seconds(op), transfer);  // waited for at once
  // Behind a backward sub-call of 2e10 FLOPs: 1.25 · 2e10 at 40 TFLOP/s = 0.625 ms + 2 µs.
  op.call.behind_attention_flops = 2e10;
  EXPECT_NEAR(t.seconds(op), transfer - (0.625e-3 + 2e-6), 1e-12);
  // A sub-call longer than the transfer hides it whole.
  op.call.behind_attention_flops = 1e15;
  EXPECT_DOUBLE_EQ(t.seconds(op), 0);
}

TEST(OpTime, AGroupThatStraddlesNodesCostsAcrossThem) {
  const auto m = parse_machine(kHand + "  inter: {busbw_GBps: 10}\n", "m.yaml");
  const OpTime t(m, kernels::Dtype::bf16);
  // Groups of 3 consecutive ranks on 8-rank domains: {6, 7, 8} crosses into the next node and
  // sets the step; groups of 4 stay inside one.
  const Op three =
      cp_collective_op("cp_kv_all_gather", {comm::CollectiveKind::all_gather, 1e6, 2, 3, 0, 0});
  EXPECT_DOUBLE_EQ(
      t.seconds(three),
      project::collective_time(m, comm::CollectiveKind::all_gather, 1000000, 2, {3, 2}).total_s());
  const Op four =
      cp_collective_op("cp_kv_all_gather", {comm::CollectiveKind::all_gather, 1e6, 2, 4, 0, 0});
  EXPECT_DOUBLE_EQ(
      t.seconds(four),
      project::collective_time(m, comm::CollectiveKind::all_gather, 1000000, 2, {4, 1}).total_s());
}

// An EP dispatch is the all-to-all the collective model prices, waited for at once; 16 ranks
// on 8-rank domains send half their chunks over the NIC.
TEST(OpTime, EpCollectivesCostTheirAllToAll) {
  const auto m = parse_machine(kHand + "  inter: {busbw_GBps: 10}\n", "m.yaml");
  const OpTime t(m, kernels::Dtype::bf16);
  const Op eight =
      ep_collective_op("ep_dispatch", {comm::CollectiveKind::all_to_all, 1e6, 2, 8, 0, 0});
  EXPECT_DOUBLE_EQ(
      t.seconds(eight),
      project::collective_time(m, comm::CollectiveKind::all_to_all, 1000000, 2, {8, 1}).total_s());
  const Op sixteen =
      ep_collective_op("ep_dispatch", {comm::CollectiveKind::all_to_all, 1e6, 2, 16, 0, 0});
  EXPECT_DOUBLE_EQ(
      t.seconds(sixteen),
      project::collective_time(m, comm::CollectiveKind::all_to_all, 1000000, 2, {16, 2}).total_s());
  EXPECT_GT(t.seconds(sixteen), t.seconds(eight));
}

TEST(Throughput, MfuHfuAndPeaks) {
  // torchtitan's A100 rows (Apr 2024: 6·N_all + 12·L·h·s, embedding included): Llama-3-8B at
  // 2,904 and 2,973 tokens/s per GPU over 312 TFLOP/s are its published 56.8 % and 58.2 %.
  const auto f = model_flops_per_token(model::build_topology("llm", "llama3-8b"), 8192);
  EXPECT_NEAR(mfu(f.six_n + f.attention, 2904, 312e12), 0.568, 5e-4);
  EXPECT_NEAR(mfu(f.six_n + f.attention, 2973, 312e12), 0.582, 5e-4);
  EXPECT_NEAR(model_tflops_per_gpu(57.9e9, 2973), 172.1, 0.1);
  EXPECT_THROW((void)mfu(1, 1, 0), InputError);
  const auto m = parse_machine(kHand, "m.yaml");
  EXPECT_DOUBLE_EQ(peak_flops(m, kernels::Dtype::bf16), 100e12);
  project::Machine none = m;
  none.compute.peak_tflops = {0, 0, 0};
  EXPECT_THROW((void)peak_flops(none, kernels::Dtype::bf16), InputError);
  // HFU with no recompute equals MFU under the op list's own (causal) convention.
  RunShape s;
  s.seq_len = 256;
  const auto w = build_step_work(model::build_topology("llm", "tiny"), s);
  EXPECT_NEAR(hfu(w, 1000, 1e12), hardware_flops_per_token(w) * 1000 / 1e12, 1e-15);
}

// op_totals: every device op of forward, recompute and backward once, by (name, parameter
// GEMM), slowest first; the collectives apart. On the tiny llm (--ac full: a recompute list
// too), the RMSNorm forward runs once per norm weight of the model and again in the recompute
// of the blocks (not the final norm: the head is never checkpointed), one fused kernel each.
TEST(OpTotals, EveryOpOnceByNameSlowestFirst) {
  const auto m = parse_machine(kHand, "m.yaml");
  const OpTime t(m, kernels::Dtype::bf16);
  RunShape s;
  s.seq_len = 256;
  s.ac = AcPolicy::full;
  const auto topo = model::build_topology("llm", "tiny");
  const auto w = build_step_work(topo, s);
  const auto totals = project::op_totals(w, t);
  double direct = 0, listed = 0;
  for (const auto& u : w.units)
    for (const auto* ops : {&u.forward, &u.recompute, &u.backward})
      for (const auto& op : *ops)
        if (!is_collective(op.kind)) direct += t.seconds(op);
  for (std::size_t i = 0; i < totals.size(); ++i) {
    listed += totals[i].seconds;
    if (i > 0) {
      EXPECT_GE(totals[i - 1].seconds, totals[i].seconds);
    }
    for (std::size_t k = 0; k < i; ++k)
      EXPECT_FALSE(totals[k].name == totals[i].name &&
                   totals[k].parameter_gemm == totals[i].parameter_gemm)
          << totals[i].name << " listed twice";
  }
  EXPECT_NEAR(listed, direct, 1e-12 * direct);
  int norms = 0, blocks = 0;
  for (int pid : topo.tree.parameter_order()) {
    const auto& name = topo.tree.parameter(pid).name;
    if (name.find("norm.weight") != std::string::npos) ++norms;
    if (name.find("input_layernorm.weight") != std::string::npos) ++blocks;
  }
  const auto norm = std::find_if(totals.begin(), totals.end(), [](const project::OpTotal& o) {
    return o.name == std::string("rms_norm") && !o.parameter_gemm;
  });
  ASSERT_NE(norm, totals.end());
  EXPECT_EQ(norm->kernels, norms + 2 * blocks);
  EXPECT_TRUE(std::any_of(totals.begin(), totals.end(), [](const project::OpTotal& o) {
    return o.name == std::string("linear") && o.parameter_gemm && o.flops > 0;
  }));
}

}  // namespace
