// The per-rank memory model (project/memory_model.hpp) against byte counts computed by hand on
// a small tree, per method and Z mode, on G = 2 ranks with a bf16 wire (2 bytes):
//
//   Net ─ a (Block) ─ l0  Linear 4→4: weight [4, 4]  16 elements   (dedicated: ndim=2)
//       ─ b (Block) ─ l1  Linear 4→8: weight [8, 4]  32 elements   (dedicated)
//       ─ n  RMSNorm weight [4]                        4 elements   (not dedicated: AdamW)
//
// Boundary types:Block: DMuon sites a and b, and the FSDP unit of n first (3 groups in forward
// order: unit, a, b). No packing; LPT gives the larger l1 to rank 0, then l0 to rank 1.
// Sharded: chunk = ceil(numel / 2): l0 8, l1 16, n 2 (padded 16, 32, 4). Prefetch 1: Z3 holds
// 2 consecutive groups' weights, the gradient ring 3 groups (prefetch + 2; here all three).
// Newton–Schulz workspace of an r×c matrix: 4·(4·r·c + 5·min(r,c)²) bytes:
//   l1 [8, 4]: 4·(128 + 80) = 832;  l0 [4, 4]: 4·(64 + 80) = 576.

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "../llm_tp_plan.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/engine/step/step_layout.hpp"
#include "dmuon/model/module_tree.hpp"
#include "dmuon/model/topology.hpp"
#include "dmuon/plan/plan.hpp"
#include "dmuon/project/machine_model.hpp"
#include "dmuon/project/memory_model.hpp"
#include "dmuon/project/projection.hpp"
#include "dmuon/project/reduced_layout.hpp"
#include "dmuon/work/step_work.hpp"
#include "test_machines.hpp"
#include "test_plan_options.hpp"

namespace {

using namespace dmuon;
using engine::Method;
using plan::Reshard;
using project::MemoryPhase;
using project::RankMemory;

model::ModuleTree small_tree() {
  model::ModuleTree t("Net");
  const int a = t.add_module(model::ModuleTree::root, "a", "Block");
  t.add_linear(a, "l0", 4, 4);
  const int b = t.add_module(model::ModuleTree::root, "b", "Block");
  t.add_linear(b, "l1", 4, 8);
  t.add_norm(model::ModuleTree::root, "n", "RMSNorm", 4);
  t.finalize();
  return t;
}

plan::Plan small_plan(const model::ModuleTree& t, Reshard z) {
  plan::PlanConfig c;
  c.dedicate_rule = "ndim=2";
  c.boundary = "types:Block";
  c.reshard = z;
  c.partition.shard = 2;
  c.partition.pack = false;
  return plan::make_plan(t, c);
}

// The engine's own holding (--dmuon-schedule overlapped); the reference's is
// ReferenceHoldsTheOptimizerAsTheReference below.
engine::StepSpec spec(Method m, Reshard z) {
  engine::StepSpec s;
  s.method = m;
  s.reshard = z;
  s.wire = kernels::Dtype::bf16;
  s.dmuon_schedule = engine::DmuonSchedule::overlapped;
  return s;
}

RankMemory memory(Method m, Reshard z, int rank) {
  const auto t = small_tree();
  const auto p = small_plan(t, z);
  return project::memory_of(engine::make_layout(t, p, spec(m, z), rank));
}

struct Expected {
  std::int64_t masters, optimizer_state, gradients, ns_input, weights, grad_buffers, gather_buffers,
      ns_workspace;
};

void expect_terms(const RankMemory& m, const Expected& e, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(m.masters, e.masters);
  EXPECT_EQ(m.optimizer_state, e.optimizer_state);
  EXPECT_EQ(m.gradients, e.gradients);
  EXPECT_EQ(m.ns_input, e.ns_input);
  EXPECT_EQ(m.weights, e.weights);
  EXPECT_EQ(m.grad_buffers, e.grad_buffers);
  EXPECT_EQ(m.gather_buffers, e.gather_buffers);
  EXPECT_EQ(m.ns_workspace, e.ns_workspace);
  EXPECT_EQ(m.tp_buffers, 0);
  EXPECT_EQ(m.activations, 0);
  EXPECT_EQ(m.recompute, 0);
}

// Rank 0 owns l1; rank 1 owns l0; both hold a shard of n (2 elements).
TEST(MemoryModel, DmuonOwnersHoldWhatTheyOwn) {
  for (Reshard z : {Reshard::z3, Reshard::z2}) {
    // Weights (bf16): Z3 the largest 2 consecutive groups, max(unit 4 + a 16, a 16 + b 32) =
    // 48 → 96 B; Z2 every group, 4 + 16 + 32 = 52 → 104 B. The same on both ranks (every
    // rank receives every site's packed weights).
    const std::int64_t weights = z == Reshard::z3 ? 96 : 104;
    // Rank 0: masters l1 32 + n 2 = 34 fp32 = 136; state: momentum 32 + n's exp_avg 2 and
    // exp_avg_sq 2 = 36 fp32 = 144; gradients: its pair (l1) 32 + n's shard 2 = 34 bf16 = 68;
    // NS input l1 32 fp32 = 128; NS workspace of l1: 832. Pooled gradients: n padded 4 + l0
    // 16 (rooted elsewhere) + b 0 (rooted here). Backward (b, a, n) holds weights and
    // gradients together: Z3 b+a 48 + 0, a+n 20 + 16, n 4 + 20; Z2 52 + 0, 20 + 16, 4 + 20:
    // the peak is the weights alone, no gradient travels beside them: 0.
    expect_terms(memory(Method::dmuon, z, 0), {136, 144, 68, 128, weights, 0, 0, 832},
                 std::string("dmuon rank 0 ") + plan::reshard_name(z));
    // Rank 1: masters l0 16 + 2 = 18 → 72; state 16 + 2 + 2 = 20 → 80; gradients 16 + 2 = 18
    // → 36; NS input 16 → 64; NS workspace of l0: 576. Pooled: n 4, a 0, l1 32: at b's
    // backward its 32 travel beside the weights (Z3 b+a 48, Z2 all 52): 32 bf16 = 64.
    expect_terms(memory(Method::dmuon, z, 1), {72, 80, 36, 64, weights, 64, 0, 576},
                 std::string("dmuon rank 1 ") + plan::reshard_name(z));
  }
}

TEST(MemoryModel, FsdpShardsEverything) {
  for (Reshard z : {Reshard::z3, Reshard::z2}) {
    // Weights: the gathered padded groups n 4, l0 16, l1 32: Z3 16 + 32 = 48 → 96, Z2 52 → 104.
    const std::int64_t weights = z == Reshard::z3 ? 96 : 104;
    for (int r : {0, 1}) {
      // fsdp-adamw: masters 8 + 16 + 2 = 26 fp32 = 104; exp_avg and exp_avg_sq 2·26 fp32 = 208;
      // gradient shards 26 bf16 = 52; no NS; pooled padded full gradients n 4, l0 16, l1 32:
      // at b's backward, b's 32 beside the weights (Z3 48, Z2 52; later positions hold less):
      // 32 bf16 = 64.
      expect_terms(memory(Method::fsdp_adamw, z, r), {104, 208, 52, 0, weights, 64, 0, 0},
                   "fsdp-adamw rank " + std::to_string(r) + " " + plan::reshard_name(z));
      // fsdp-muon: momentum of the Muon shards 24 + n's exp_avg 2 and exp_avg_sq 2 = 28 fp32 =
      // 112; NS input 24 fp32 = 96; the gather pool: 2 slots of the largest gathered matrix
      // (l1 padded 32) = 64 bf16 = 128; every rank runs NS on l1 and l0: workspace of l1, 832.
      expect_terms(memory(Method::fsdp_muon, z, r), {104, 112, 52, 96, weights, 64, 128, 832},
                   "fsdp-muon rank " + std::to_string(r) + " " + plan::reshard_name(z));
    }
  }
}

// --param-dtype bf16 (NeMo AutoModel's MoE models): masters and optimizer state in 2 bytes, and
// autograd's gradients too (a .grad has its parameter's type; FSDP2 casts the reduced shard
// back to it), whatever the reduce type; the NS input stays fp32.
TEST(MemoryModel, ParamDtypeKeepsMastersStateAndGradientsInIt) {
  const auto t = small_tree();
  const auto p = small_plan(t, Reshard::z3);
  auto s = spec(Method::fsdp_adamw, Reshard::z3);
  s.reduce = kernels::Dtype::f32;
  // fp32 parameters with fp32 gradients (Z3): masters 26 fp32 = 104, state 208, gradient shards
  // 26 fp32 = 104; the travelling fp32 gradients as
  // Fsdp2HoldsOneReduceInputBesideAutogradsGradients counts the engine's ring: 136.
  expect_terms(project::memory_of(engine::make_layout(t, p, s, 0)),
               {104, 208, 104, 0, 96, 136, 0, 0}, "fsdp-adamw fp32");
  // bf16 parameters: masters 26 x 2 = 52, exp_avg and exp_avg_sq 52 x 2 = 104, gradient shards
  // 26 bf16 = 52; the travelling gradients stay in the reduce type (136).
  s.param = kernels::Dtype::bf16;
  expect_terms(project::memory_of(engine::make_layout(t, p, s, 0)), {52, 104, 52, 0, 96, 136, 0, 0},
               "fsdp-adamw bf16");
  // dmuon rank 0 (DmuonOwnersHoldWhatTheyOwn's): masters 34 x 2 = 68, state 36 x 2 = 72; its
  // reduced pair (l1, bf16 wire) 64 + n's shard 2 x 2 = 68 as before; NS input 128 fp32.
  auto d = spec(Method::dmuon, Reshard::z3);
  d.param = kernels::Dtype::bf16;
  expect_terms(project::memory_of(engine::make_layout(t, p, d, 0)),
               {68, 72, 68, 128, 96, 0, 0, 832}, "dmuon bf16");
}

// FSDP2's gradients (StepSpec::fsdp2) against the engine's ring, fsdp-adamw Z3 with fp32
// gradients (reduce 4 B, wire 2 B). Backward order b (32), a (16), n (padded 4); live weights
// b + a = 96 B at b, a + n = 40 at a, n 8 at n; forward's live weights 96.
//   ring (3 slots, none reused): b 96 + 128 = 224; a 40 + 128 + 64 = 232; n 8 + 208 = 216:
//         232 − 96 = 136.
//   FSDP2: at b, autograd's bf16 gradients 64 beside the weights (96 + 64 = 160), then b's
//         weights are released and the copy-in writes b's fp32 reduce input 128 beside the
//         bf16 ones: 32 + 64 + 128 = 224; at a, b's input in flight while a computes
//         (40 + 128 + 32 = 200), then a's weights and b's input are freed and a's written
//         (8 + 64 + 32); n less: 224 − 96 = 128.
TEST(MemoryModel, Fsdp2HoldsOneReduceInputBesideAutogradsGradients) {
  const auto t = small_tree();
  const auto p = small_plan(t, Reshard::z3);
  auto s = spec(Method::fsdp_adamw, Reshard::z3);
  s.reduce = kernels::Dtype::f32;
  for (int r : {0, 1}) {
    s.fsdp2 = false;
    EXPECT_EQ(project::memory_of(engine::make_layout(t, p, s, r)).grad_buffers, 136) << r;
    s.fsdp2 = true;
    EXPECT_EQ(project::memory_of(engine::make_layout(t, p, s, r)).grad_buffers, 128) << r;
  }
  // Three equal blocks (16 elements each: weights 32 B, autograd's gradients 32, reduce
  // inputs 64; live weights 64 at the first two positions, 32 at the last). FSDP2 peaks while
  // the second block computes beside the first's input, 64 + 64 + 32 = 160, then frees that
  // input before its copy-in (32 + 64 + 32): 160 − 64 = 96; the ring keeps all three inputs:
  // 32 + 3·64 = 224 at the last, 224 − 64 = 160.
  model::ModuleTree equal("Net");
  for (const char* b : {"a", "b", "c"})
    equal.add_linear(equal.add_module(model::ModuleTree::root, b, "Block"), "l", 4, 4);
  equal.finalize();
  const auto q = small_plan(equal, Reshard::z3);
  s.fsdp2 = false;
  EXPECT_EQ(project::memory_of(engine::make_layout(equal, q, s, 0)).grad_buffers, 160);
  s.fsdp2 = true;
  EXPECT_EQ(project::memory_of(engine::make_layout(equal, q, s, 0)).grad_buffers, 96);

  // Autograd's gradients are in each parameter's own weight type: a 256-element norm (the
  // FSDP unit, last in backward) beside a.l0 (16). bf16: weights n 512 + a 32 = 544; at n,
  // a's input 64 in flight beside n's autograd 512 and its weights 512: 1,088; the copy-in
  // 1,024 + 512: 1,536 − 544 = 992. Routed fp32 (--route contains:n=fsdp:fp32; its gradients
  // pool in the fp32 reduce type): weights 1,024 + 32 = 1,056; at n, 1,024 + 64 + 1,024 =
  // 2,112 − 1,056 = 1,056.
  model::ModuleTree normed("Net");
  normed.add_norm(model::ModuleTree::root, "n", "RMSNorm", 256);
  normed.add_linear(normed.add_module(model::ModuleTree::root, "a", "Block"), "l0", 4, 4);
  normed.finalize();
  for (const bool routed : {false, true}) {
    plan::PlanConfig c;
    c.dedicate_rule = "ndim=2";
    c.boundary = "types:Block";
    c.partition.shard = 2;
    c.partition.pack = false;
    if (routed) c.routes = {"contains:n=fsdp:fp32"};
    const auto L = engine::make_layout(normed, plan::make_plan(normed, c), s, 0);
    EXPECT_EQ(project::memory_of(L).grad_buffers, routed ? 1056 : 992) << routed;
  }
}

// FSDP2's root unit (StepLayout::stays_gathered: fsdp2 under Z3) is live from its forward to
// its backward. The small tree, bf16, prefetch 1; the root unit is n (padded 4: 8 B), then a
// (32 B) and b (64 B). Forward: n + a = 40, a + b and n kept = 104, b + n = 72: 104 B (the
// engine's ring of two groups: 96). Backward (b, a, n), fsdp-adamw: b + a and n 104, b's
// autograd gradients 64 beside them: 168; b's weights freed and its input (64) written beside
// its 64: 40 + 128 = 168; a (40 + 64 + 32 = 136) and n hold less: 168 − 104 = 64, as without the
// rule (96 + 64 = 160 there): the backward phase holds 8 B more, n's gathered weights. dmuon
// rank 1 (l1's 32 travel, rooted on rank 0): b + a and n 104 with b's 64 = 168, 64 B again.
// Z2 keeps every group anyway: 104 B either way.
TEST(MemoryModel, Fsdp2KeepsTheRootUnitsWeightsFromForwardToBackward) {
  const auto t = small_tree();
  for (Method m : {Method::fsdp_adamw, Method::dmuon}) {
    const int r = m == Method::dmuon ? 1 : 0;
    auto s = spec(m, Reshard::z3);
    for (bool fsdp2 : {false, true}) {
      s.fsdp2 = fsdp2;
      const auto L = engine::make_layout(t, small_plan(t, Reshard::z3), s, r);
      const RankMemory mem = project::memory_of(L);
      EXPECT_EQ(mem.weights, fsdp2 ? 104 : 96) << engine::method_name(m) << fsdp2;
      EXPECT_EQ(mem.grad_buffers, 64) << engine::method_name(m) << fsdp2;
      EXPECT_EQ(mem.phase_bytes(MemoryPhase::backward) - mem.persistent(), fsdp2 ? 168 : 160);
    }
    s = spec(m, Reshard::z2);
    for (bool fsdp2 : {false, true}) {
      s.fsdp2 = fsdp2;
      const auto L = engine::make_layout(t, small_plan(t, Reshard::z2), s, r);
      EXPECT_EQ(project::memory_of(L).weights, 104) << engine::method_name(m) << fsdp2;
    }
  }
}

// The projection applies FSDP2's rule on a GPU machine only (projection.cpp sets
// StepSpec::fsdp2 there): the small tree's hand values above, 128 B on a GPU, the engine's
// ring's 136 B on a CPU.
TEST(MemoryModel, TheProjectionHoldsFsdp2sGradientsOnAGpuOnly) {
  const auto t = small_tree();
  const auto p = small_plan(t, Reshard::z3);
  project::ProjectionOptions po;
  po.engine.step = spec(Method::fsdp_adamw, Reshard::z3);
  po.engine.step.reduce = kernels::Dtype::f32;
  const auto gpu = project::project(t, p, project::testing::measured_machine(2, 10, 5, "gpu"), po);
  EXPECT_EQ(gpu.memory.grad_buffers, 128);
  const auto cpu = project::project(t, p, project::testing::measured_machine(2, 10, 5, "cpu"), po);
  EXPECT_EQ(cpu.memory.grad_buffers, 136);
}

TEST(MemoryModel, DdpReplicatesEverything) {
  for (Reshard z : {Reshard::z3, Reshard::z2})
    for (int r : {0, 1}) {
      // Masters 16 + 32 + 4 = 52 fp32 = 208; momentum 48 + n's 4 + 4 = 56 fp32 = 224; full
      // gradients 52 bf16 = 104; NS input 48 fp32 = 192; computes on its replicas: no gathered
      // weights, no pooled gradients; NS workspace of l1: 832.
      expect_terms(memory(Method::ddp_muon, z, r), {208, 224, 104, 192, 0, 0, 0, 832},
                   "ddp-muon rank " + std::to_string(r) + " " + plan::reshard_name(z));
    }
}

// The gradient terms are computed from the pairs and parameters (a reduced layout keeps no
// arena totals): on full layouts they are the engine's persistent gradient arenas.
TEST(MemoryModel, GradientsAreTheEnginesArenas) {
  const auto t = small_tree();
  for (Method m : engine::kAllMethods)
    for (Reshard z : {Reshard::z3, Reshard::z2}) {
      const auto p = small_plan(t, z);
      for (int r : {0, 1}) {
        const auto L = engine::make_layout(t, p, spec(m, z), r);
        EXPECT_EQ(project::memory_of(L).gradients, 2 * L.grad_arena_elems + 2 * L.alt_grad_elems)
            << engine::method_name(m) << " rank " << r;
      }
    }
}

// `saved` activation bytes, and `live` more while the first unit's backward runs.
project::ActivationMemory activations(std::int64_t saved, std::int64_t live) {
  project::ActivationMemory a;
  a.saved = saved;
  a.first_live = a.recompute = live;
  a.modelled = true;
  return a;
}

TEST(MemoryModel, PhasesAndPeak) {
  RankMemory m = memory(Method::dmuon, Reshard::z3, 0);
  // Persistent: 136 + 144 + 68 + 128 = 476. Forward 476 + 96 = 572; backward + 0 = 572;
  // optimizer 476 + 832 = 1308: the peak.
  EXPECT_EQ(m.persistent(), 476);
  EXPECT_EQ(m.phase_bytes(MemoryPhase::forward), 572);
  EXPECT_EQ(m.phase_bytes(MemoryPhase::backward), 572);
  EXPECT_EQ(m.phase_bytes(MemoryPhase::optimizer), 1308);
  EXPECT_EQ(m.peak_phase(), MemoryPhase::optimizer);
  // 1000 saved activation bytes and 100 more during backward (no gradient buffers here):
  // backward 572 + 1100 = 1672 is the peak.
  m = project::with_activations(m, activations(1000, 100));
  EXPECT_EQ(m.peak_phase(), MemoryPhase::backward);
  EXPECT_EQ(m.peak(), 1672);
  // A device of 1e-6 GB = 1000 bytes: 672 over; no capacity: no check.
  EXPECT_EQ(project::excess_bytes(m, 1e-6), 672);
  EXPECT_EQ(project::excess_bytes(m, 2e-6), 0);
  EXPECT_EQ(project::excess_bytes(m, 0), 0);
}

// The projection's peak is the largest over ranks, with its rank and phase, the same with and
// without rank symmetry (reduced layouts): rank 0's optimizer phase, 1308 B (rank 1: 252 +
// 576 = 828).
TEST(MemoryModel, ProjectionPeakRankAndPhase) {
  const auto t = small_tree();
  const auto p = small_plan(t, Reshard::z3);
  for (auto symmetry : {project::Symmetry::full, project::Symmetry::reduced}) {
    project::ProjectionOptions po;
    po.engine.step = spec(Method::dmuon, Reshard::z3);
    po.symmetry = symmetry;
    const auto proj =
        project::project(t, p, project::testing::measured_machine(2, 10, 5, "gpu"), po);
    EXPECT_EQ(proj.memory.peak(), 1308);
    EXPECT_EQ(proj.memory.rank, 0);
    EXPECT_EQ(proj.memory.peak_phase(), MemoryPhase::optimizer);
    // With activations, every rank's backward grows alike: rank 0's is 572 + 2100 = 2672
    // (rank 1's 412 + 2100), and 8 B more on a GPU, where FSDP2's root unit n (4 bf16
    // elements gathered) stays live from its forward to its backward: 2680.
    po.activations = activations(2000, 100);
    const auto with =
        project::project(t, p, project::testing::measured_machine(2, 10, 5, "gpu"), po);
    EXPECT_EQ(with.memory.peak(), 2680);
    EXPECT_EQ(with.memory.rank, 0);
    EXPECT_EQ(with.memory.peak_phase(), MemoryPhase::backward);
  }
}

// Activations: what autograd keeps (work::Op::saved_bytes), counted by hand for llm tiny with
// one block (h 128, q 4 heads × 32, k/v 1 head × 32, SwiGLU 256, vocabulary 1000), s = 16,
// b = 1, bf16 (e = 2). T = 16 tokens, N = T·h = 2,048 elements.
//   stem    token ids 8·T = 128
//   block   fused: norm x + rstd 4,096 + 64; q's input 4,096 (k, v share it); attention Q
//           4,096, K and V repeated to 4 heads 4,096 each, O 4,096, LSE 4·T·4 = 256; o's input
//           is O; norm 4,160; gate's input 4,096 (up shares it); SwiGLU gate + up 2·8,192;
//           down's input 8,192: 57,728. Eager norms keep x.float() 4N, rstd, the cast-back
//           x̂ N·e (12,352 each) and SwiGLU silu(a) too (24,576): 82,304.
//   head    final norm 4,160 (eager 12,352), head input 4,096, loss fused logits 32,000 + LSE
//           64 + labels 128 (eager: fp32 log-probs 64,000 + labels 128): 40,448 (80,576)
// Backward extra: the loss's gradient (fused 32,000; eager at most nll's and log_softmax's
// fp32 gradients together, 2·4L + 4T = 128,064, of its 2·4L + L·e + 4T = 160,064 written: the
// bf16 cast comes after nll's is freed) runs first; a block's largest backward output is
// attention.bwd's 20,736 (weight gradients are not activations).
work::StepWork tiny_work(work::AcPolicy ac, work::Fusion fusion) {
  work::RunShape s;
  s.seq_len = 16;
  s.ac = ac;
  s.fusion = fusion;
  return work::build_step_work(model::build_topology("llm", "tiny", {{"L", "1"}}), s);
}

TEST(MemoryModel, ActivationsAreWhatAutogradKeeps) {
  using work::AcPolicy;
  using work::Fusion;
  const auto none = project::activation_memory(tiny_work(AcPolicy::none, Fusion::fused));
  EXPECT_TRUE(none.modelled);
  EXPECT_EQ(none.saved, 128 + 57728 + 40448);
  EXPECT_EQ(none.first_saved, 40448);
  EXPECT_EQ(none.first_live, 32000);
  EXPECT_EQ(none.rest_live, 20736);
  const auto eager = project::activation_memory(tiny_work(AcPolicy::none, Fusion::eager));
  EXPECT_EQ(eager.saved, 128 + 82304 + 80576);
  EXPECT_EQ(eager.first_live, 128064);
  // full: the block keeps its input (4,096) and recreates its 57,728 in backward.
  const auto full = project::activation_memory(tiny_work(AcPolicy::full, Fusion::fused));
  EXPECT_EQ(full.saved, 128 + 4096 + 40448);
  EXPECT_EQ(full.rest_live, 57728 + 20736);
  // selective (SAC): the checkpoint plus the outputs of q 4,096, v 1,024, gate 8,192, down
  // 4,096 and the attention 4,096 + 256 = 21,760; backward recreates the other 35,968.
  const auto sel = project::activation_memory(tiny_work(AcPolicy::selective, Fusion::fused));
  EXPECT_EQ(sel.saved, 128 + 4096 + 21760 + 40448);
  EXPECT_EQ(sel.rest_live, 57728 - 21760 + 20736);
  // core-attn: all but the LSE, recomputed with O.
  const auto core = project::activation_memory(tiny_work(AcPolicy::core_attn, Fusion::fused));
  EXPECT_EQ(core.saved, none.saved - 256);
  EXPECT_EQ(core.rest_live, 4096 + 256 + 20736);
}

// Backward's peak: the loss's gradient before any gradient travels, or a later unit's with the
// head's tensors freed and grad_buffers travelling.
TEST(MemoryModel, BackwardExtraWeighsTheFirstUnitAgainstTheGradientBuffers) {
  project::ActivationMemory a;
  a.first_saved = 100;
  a.first_live = 500;
  a.rest_live = 300;
  // Beyond activations + grad_buffers: max(500 − grad_buffers, 300 − 100).
  EXPECT_EQ(a.backward_extra(0), 500);
  EXPECT_EQ(a.backward_extra(250), 250);
  EXPECT_EQ(a.backward_extra(900), 200);
  a.rest_live = 50;  // later units add less than the head's tensors freed: nothing
  EXPECT_EQ(a.backward_extra(900), 0);
}

// Rank symmetry: a DMuon rank's reduced layout (reduced_layout.hpp: its rooted pairs kept, the
// other members of a site as one aggregate, pool windows and TP sizes from the reference rank)
// gives every term its full layout gives, on every rank: HSDP column copies, --accum, --tp.
TEST(MemoryModel, ReducedLayoutsAgreeWithFullOnes) {
  struct Case {
    std::string topology;
    int world, replicate, tp, accum;
    plan::Reshard z;
  };
  int cases_where_ranks_differ = 0;
  for (const auto& c : std::vector<Case>{{"moe", 4, 1, 1, 1, Reshard::z3},
                                         {"moe", 4, 2, 1, 2, Reshard::z2},
                                         {"vla", 8, 2, 1, 1, Reshard::z3},
                                         {"llm", 4, 1, 2, 1, Reshard::z3},
                                         {"llm", 8, 2, 2, 2, Reshard::z2}}) {
    const std::string name = c.topology + " N=" + std::to_string(c.world) +
                             " R=" + std::to_string(c.replicate) + " T=" + std::to_string(c.tp);
    plan::Plan p;
    model::ModuleTree tree("none");
    if (c.tp > 1) {
      auto s = test::llm_tp_plan(c.world, c.replicate, c.tp);
      p = std::move(s.plan);
      tree = std::move(s.local);
    } else {
      test::PlanOptions po;
      po.topology = c.topology;
      po.replicate = c.replicate;
      auto topo = test::load_topology(po);
      p = plan::make_plan(topo.tree, test::make_plan_config(po, topo, c.world));
      tree = std::move(topo.tree);
    }
    engine::StepSpec s = spec(Method::dmuon, c.z);
    s.accum = c.accum;
    const auto ref = engine::make_layout(tree, p, s, 0);
    const project::LayoutReducer reducer(ref, p);
    bool differ = false;
    for (int r = 0; r < c.world; ++r) {
      const auto full = project::memory_of(engine::make_layout(tree, p, s, r));
      auto reduced = reducer.reduce(r - r % c.tp);
      reduced.layout.me.rank = r;
      const auto red = project::memory_of(reduced.layout);
      const auto a = full.terms(), b = red.terms();
      for (std::size_t i = 0; i < a.size(); ++i)
        EXPECT_EQ(a[i].second, b[i].second) << name << " rank " << r << " " << a[i].first;
      differ = differ || full.terms() != project::memory_of(ref).terms();
    }
    cases_where_ranks_differ += differ;
  }
  // Not a weak test: ranks differ (moe R=1: the pooled gradients; vla: masters and state; llm
  // R=2 T=2: the optimizer state).
  EXPECT_GE(cases_where_ranks_differ, 3);
}

TEST(MemoryModel, MachineMemoryKey) {
  const auto a100 = project::load_machine("a100-80gb", DMUON_MACHINES_DIR);
  // What CUDA can allocate: 79.15 GiB of an 80 GiB A100 (PyTorch's total capacity), 140.4 GiB
  // of an H200 less the same 0.85 GiB reserve (the machine files' comments).
  EXPECT_DOUBLE_EQ(a100.memory_gb, 84.99);
  EXPECT_NEAR(79.15 * 1073741824.0 / 1e9, 84.99, 0.005);
  EXPECT_DOUBLE_EQ(project::load_machine("h200", DMUON_MACHINES_DIR).memory_gb, 149.8);
  EXPECT_NEAR((143771.0 / 1024 - 0.85) * 1073741824.0 / 1e9, 149.8, 0.05);
  EXPECT_EQ(project::load_machine("gb200-nvl72", DMUON_MACHINES_DIR).memory_gb, 186);
  // Optional: a machine without it has no capacity check; to_yaml keeps it.
  EXPECT_EQ(project::testing::measured_machine(2, 10, 5).memory_gb, 0);
  EXPECT_DOUBLE_EQ(project::parse_machine(project::to_yaml(a100), "again").memory_gb, 84.99);
  std::string text = a100.text;
  const auto at = text.find("memory_GB: 84.99");
  ASSERT_NE(at, std::string::npos);
  for (const char* bad : {"memory_GB: -3", "memory_GB: lots", "memory_GB: 0"}) {
    std::string t = text;
    t.replace(at, std::string("memory_GB: 84.99").size(), bad);
    try {
      project::parse_machine(t, "bad.yaml");
      ADD_FAILURE() << bad << " was accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("memory_GB"), std::string::npos) << e.what();
    }
  }
}

}  // namespace

namespace {

using namespace dmuon;

RankMemory reference_memory(int rank, bool clip = false,
                            engine::MomentumDtype momentum = engine::MomentumDtype::grad) {
  const auto t = small_tree();
  const auto p = small_plan(t, Reshard::z2);
  auto s = spec(Method::dmuon, Reshard::z2);
  s.dmuon_schedule = engine::DmuonSchedule::reference;
  s.momentum = momentum;
  s.clip_norm = clip ? 1 : 0;
  return project::memory_of(engine::make_layout(t, p, s, rank));
}

}  // namespace

// The reference's optimizer memory on the small tree (bf16 wire and gradients, g = 2 bytes), Z2.
// Rank 0 owns l1 [8, 4] (32 elements, site b), rank 1 l0 [4, 4] (16, site a); both hold n's
// AdamW shard (chunk 2: exp_avg and exp_avg_sq fp32).
//   optimizer_state   momentum in bf16 + AdamW: rank 0 2·32 + 4·(2 + 2) = 80; rank 1 2·16 + 16 = 48
//                     (--momentum-dtype fp32: 4·32 + 16 = 144, the engine's)
//   ns_input          0 (a temporary)
//   ns_workspace      max(8·r·c, 4·r·c + 12·m²): l1 max(256, 128 + 192) = 320; l0 max(128, 64 +
//   192)
//                     = 256, in the graph pool (persistent)
//   graph_buffers     2·g·r·c per distinct shape: 128; 64
//   optimizer_transient  g·(largest r·c + the clones of two consecutive sites' owned gradients):
//                     2·(32 + 32) = 128; 2·(16 + 16) = 64 (clip: every owned gradient, the same)
TEST(MemoryModel, ReferenceHoldsTheOptimizerAsTheReference) {
  const RankMemory r0 = reference_memory(0), r1 = reference_memory(1);
  EXPECT_EQ(r0.optimizer_state, 80);
  EXPECT_EQ(r1.optimizer_state, 48);
  EXPECT_EQ(reference_memory(0, false, engine::MomentumDtype::fp32).optimizer_state, 144);
  EXPECT_EQ(r0.ns_input, 0);
  EXPECT_EQ(r0.ns_workspace, 320);
  EXPECT_EQ(r1.ns_workspace, 256);
  EXPECT_EQ(r0.graph_buffers, 128);
  EXPECT_EQ(r1.graph_buffers, 64);
  EXPECT_EQ(r0.optimizer_transient, 128);
  EXPECT_EQ(r1.optimizer_transient, 64);
  EXPECT_EQ(reference_memory(0, true).optimizer_transient, 128);
  EXPECT_TRUE(r0.graph_pool);
  // The pool's workspace and the graph buffers are persistent; the transients only in the
  // optimizer.
  EXPECT_EQ(r0.persistent(),
            r0.masters + r0.optimizer_state + r0.gradients + r0.graph_buffers + r0.ns_workspace);
  EXPECT_EQ(r0.phase_bytes(MemoryPhase::optimizer), r0.persistent() + r0.optimizer_transient);
  // The overlapped schedule keeps the engine's holding (the tests above).
  const RankMemory e0 = memory(Method::dmuon, Reshard::z2, 0);
  EXPECT_EQ(e0.optimizer_state, 144);
  EXPECT_EQ(e0.graph_buffers, 0);
  EXPECT_FALSE(e0.graph_pool);
}

// Llama-3-8B on 8 ranks (bf16 weights and gradients, Z2, the 2-D projections dedicated, LPT),
// the reference's step, by hand: h 4096, kv 1024, i 14336, 32 layers, vocabulary 128256.
//   dedicated elements  32·(2·4096² + 2·1024·4096 + 3·4096·14336) = 32·218,103,808
//                       = 6,979,321,856; the rest: embed + lm_head 2·128256·4096 = 1,050,673,152
//                       + 65 norms of 4096 = 266,240 → 1,050,939,392 (every one divides by 8)
//   weights (Z2)        every rank holds all of them gathered in bf16: 2·8,030,261,248
//                       = 16,060,522,496
//   momentum            bf16, over the ranks 2·6,979,321,856 = 13,958,643,712
//   AdamW state         per rank fp32 exp_avg + exp_avg_sq of its shard: 8·1,050,939,392 / 8
//                       = 1,050,939,392
//   ns_workspace        max(8·r·c, 4·r·c + 12·m²) of its largest matrix: 14336×4096
//                       469,762,048; 4096×4096 268,435,456; 1024×4096 33,554,432
//   graph_buffers       4·r·c per distinct shape it owns (gate/up [14336, 4096] and down
//                       [4096, 14336] are two): 234,881,024 / 67,108,864 / 16,777,216
TEST(MemoryModel, Llama3_8bOnEightRanksHeldAsTheReferenceHoldsIt) {
  test::PlanOptions po;
  po.topology = "llm";
  po.preset = "llama3-8b";
  po.dedicate = "ndim=2&contains:proj";
  po.boundary = "recommended";
  po.reshard = Reshard::z2;
  const auto topo = test::load_topology(po);
  const auto plan = plan::make_plan(topo.tree, test::make_plan_config(po, topo, 8));
  engine::StepSpec s;
  s.method = Method::dmuon;
  s.reshard = Reshard::z2;
  s.wire = kernels::Dtype::bf16;
  std::int64_t momentum_total = 0;
  const std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>> by_size = {
      {14336LL * 4096, {469'762'048, 234'881'024}},
      {4096LL * 4096, {268'435'456, 67'108'864}},
      {1024LL * 4096, {33'554'432, 16'777'216}}};
  for (int r = 0; r < 8; ++r) {
    const auto L = engine::make_layout(topo.tree, plan, s, r);
    const RankMemory m = project::memory_of(L);
    EXPECT_EQ(m.weights, 16'060'522'496) << r;
    std::int64_t owned = 0, workspace = 0, graphs = 0;
    std::set<std::pair<std::int64_t, std::int64_t>> shapes;
    for (const auto& p : L.params)
      if (p.muon && p.updated_here) {
        owned += p.numel;
        workspace = std::max(workspace, by_size.at(p.numel).first);
        if (shapes.emplace(p.shape.rows, p.shape.cols).second) graphs += by_size.at(p.numel).second;
      }
    EXPECT_EQ(m.optimizer_state, 2 * owned + 1'050'939'392) << r;
    EXPECT_EQ(m.ns_input, 0) << r;
    EXPECT_EQ(m.ns_workspace, workspace) << r;
    EXPECT_EQ(m.graph_buffers, graphs) << r;
    momentum_total += m.optimizer_state - 1'050'939'392;
  }
  EXPECT_EQ(momentum_total, 13'958'643'712);
}
