// Expert parallelism in the engine (--ep E = G, and E < G below; docs/STEP-WORK.md "Expert
// parallelism"): on
// the tiny moe-llm (114 parameters; 72 of them the 8 routed experts x 3 Linears of layers
// 1..3) each rank holds 8/E experts of each layer whole and updates them itself. Every method
// passes --check against the one-process reference of its EP rank (all routed samples, the
// clip norm over every rank's experts), its bytes equal the formula on every rank (the
// engine's audit), and, counted by hand, no collective carries an expert: 42 FSDP
// reduce-scatters (114 - 72 parameters) and 28 DMuon reduces (the 100 'proj' matrices less
// the 72 experts') per step at any E.

#include <gtest/gtest.h>
#include <mpi.h>

#include <functional>

#include "dmuon/engine/engine.hpp"
#include "dmuon/engine/step/activation_work.hpp"
#include "dmuon/work/step_work.hpp"
#include "kokkos_environment.hpp"
#include "mpi_test_util.hpp"
#include "plan_setup.hpp"
#include "test_plan_options.hpp"

namespace {

using namespace dmuon;
using engine::CommGroup;
using engine::Method;

engine::RunResult run(Method method, plan::Reshard reshard,
                      const std::function<void(engine::EngineOptions&)>& adjust = {},
                      int ep = test::world_size()) {
  test::PlanOptions po;
  po.topology = "moe-llm";
  po.reshard = reshard;
  po.ep = ep;
  const auto s = test::make_plan_setup(po);
  engine::EngineOptions o;
  o.step.method = method;
  o.step.reshard = reshard;
  o.step.global_tokens = 16;
  o.run.steps = 2;
  o.run.warmup = 0;
  o.run.seed = 5;
  o.run.check = true;
  if (adjust) adjust(o);
  return engine::run_engine(s.topo.tree, s.plan, o, MPI_COMM_WORLD);
}

std::int64_t calls(const engine::RunResult& r, comm::CollectiveKind k,
                   CommGroup group = CommGroup::shard) {
  return r.kinds[engine::channel_index(group, k)].calls_per_step;
}

void expect_checked(const engine::RunResult& r) {
  EXPECT_TRUE(r.audit_ok) << r.audit_message;
  EXPECT_TRUE(r.checked);
  EXPECT_TRUE(r.check_passed) << "max rel error " << r.max_rel_error << " at " << r.worst_param
                              << " " << r.check_note;
}

bool skip_world() {
  const int n = test::world_size();
  return n < 2 || 8 % n != 0;
}

TEST(EpEngine, EveryMethodChecksAndMovesNoExpert) {
  if (skip_world()) GTEST_SKIP() << "--ep = the world: 2, 4 or 8 ranks (8 experts)";
  for (Method m : {Method::dmuon, Method::fsdp_adamw, Method::fsdp_muon, Method::ddp_muon,
                   Method::ddp_dmuon}) {
    SCOPED_TRACE(engine::method_name(m));
    const auto r = run(m, plan::Reshard::z3);
    expect_checked(r);
    if (m == Method::dmuon) {
      EXPECT_EQ(calls(r, comm::CollectiveKind::reduce), 28);
    }
    if (m == Method::fsdp_adamw || m == Method::fsdp_muon) {
      EXPECT_EQ(calls(r, comm::CollectiveKind::reduce_scatter), 42);
    }
    if (m == Method::ddp_muon) {
      EXPECT_EQ(calls(r, comm::CollectiveKind::all_reduce), 42);
    }
  }
}

// --clip-norm over every rank's experts (0.05 clips every step: a norm missing another rank's
// experts changes every update), --accum 2 (the experts accumulate without a reduce), Z2.
TEST(EpEngine, ClipAccumZ2) {
  if (skip_world()) GTEST_SKIP() << "--ep = the world: 2, 4 or 8 ranks (8 experts)";
  const auto adjust = [](engine::EngineOptions& o) {
    o.step.clip_norm = 0.05;
    o.step.accum = 2;
  };
  expect_checked(run(Method::dmuon, plan::Reshard::z2, adjust));
  expect_checked(run(Method::fsdp_muon, plan::Reshard::z3, [&](engine::EngineOptions& o) {
    adjust(o);
    o.step.clip_norm_type = engine::ClipNormType::inf;
  }));
}

// A 16-bit wire: the experts' compute copy rounded, their gradients in bf16.
TEST(EpEngine, Bf16Wire) {
  if (skip_world()) GTEST_SKIP() << "--ep = the world: 2, 4 or 8 ranks (8 experts)";
  expect_checked(run(Method::dmuon, plan::Reshard::z3, [](engine::EngineOptions& o) {
    o.step.wire = kernels::Dtype::bf16;
    o.step.global_tokens = 128;  // every Muon matrix full rank (a 16-bit check's need)
  }));
}

// --ep 2 on 4 ranks (E < G): ranks 0 and 2 hold experts 0-3 of each layer, ranks 1 and 3
// experts 4-7; each pair is an expert group of G/E = 2 ranks sharing its 3 x 12 = 36 expert
// matrices as the row shares the dense ones, each replica training on half of the samples
// routed to its experts. Every method --check'ed (rank 0 its gathered EP-rank-0 experts, the
// others what they hold of theirs against their EP rank's reference) and audited; counted by
// hand per step: the dense collectives as at E = G, and on the expert group: FSDP 36
// reduce-scatters and 2 x 36 all-gathers (Z3; fsdp-muon + 36 Nesterov gathers), DDP 36
// all-reduces, DMuon 36 reduces to the owners and 2 x 3 broadcasts (each layer's 12 small
// matrices packed into one unit: one owner, one packed buffer per layer) at 3 more hook sites.
bool skip_expert_groups() {
  return test::world_size() != 4;
}

TEST(EpEngine, ExpertGroupsEveryMethodChecked) {
  if (skip_expert_groups()) GTEST_SKIP() << "--ep 2 on 4 ranks: expert groups of 2";
  using K = comm::CollectiveKind;
  constexpr auto X = CommGroup::expert;
  for (Method m : {Method::dmuon, Method::fsdp_adamw, Method::fsdp_muon, Method::ddp_muon,
                   Method::ddp_dmuon}) {
    SCOPED_TRACE(engine::method_name(m));
    const auto r = run(m, plan::Reshard::z3, {}, 2);
    expect_checked(r);
    if (m == Method::dmuon) {
      EXPECT_EQ(calls(r, K::reduce), 28);
      EXPECT_EQ(calls(r, K::reduce, X), 36);
      EXPECT_EQ(calls(r, K::broadcast, X), 6);
      EXPECT_EQ(r.hook_sites, 4 + 3);
    }
    if (m == Method::fsdp_adamw || m == Method::fsdp_muon) {
      EXPECT_EQ(calls(r, K::reduce_scatter), 42);
      EXPECT_EQ(calls(r, K::reduce_scatter, X), 36);
      EXPECT_EQ(calls(r, K::all_gather, X), m == Method::fsdp_muon ? 108 : 72);
    }
    if (m == Method::ddp_muon) {
      EXPECT_EQ(calls(r, K::all_reduce), 42);
      EXPECT_EQ(calls(r, K::all_reduce, X), 36);
    }
    if (m == Method::ddp_dmuon) {
      EXPECT_EQ(calls(r, K::reduce, X), 36);
      EXPECT_EQ(calls(r, K::broadcast, X), 3);  // each owner's fp32 masters, once
    }
  }
}

// The clip norm over every expert group's shards and owners, --accum 2, Z2, a bf16 wire.
TEST(EpEngine, ExpertGroupsClipAccumZ2Bf16) {
  if (skip_expert_groups()) GTEST_SKIP() << "--ep 2 on 4 ranks: expert groups of 2";
  const auto adjust = [](engine::EngineOptions& o) {
    o.step.clip_norm = 0.05;
    o.step.accum = 2;
  };
  expect_checked(run(Method::dmuon, plan::Reshard::z2, adjust, 2));
  expect_checked(run(
      Method::fsdp_muon, plan::Reshard::z3,
      [&](engine::EngineOptions& o) {
        adjust(o);
        o.step.clip_norm_type = engine::ClipNormType::inf;
      },
      2));
  expect_checked(run(
      Method::dmuon, plan::Reshard::z3,
      [](engine::EngineOptions& o) {
        o.step.wire = kernels::Dtype::bf16;
        o.step.global_tokens = 128;
      },
      2));
}

// --ep with --seq-len: the activation work's routed-token all-to-alls run over each EP group
// (CommGroup::ep: E ranks, one of each EP rank). The tiny moe-llm (h 128, 8 experts, top-2,
// layers 1..3 MoE) at 16 tokens per rank, fp32 on the host: per MoE layer and micro-step
// torchtitan's dispatch sends the 8 per-expert counts (8/E int64 to each rank), the 16 x 2
// routed rows of 128 fp32 (32·128/E to each rank), the combine as many back, and backward both
// again: 5 calls, each rank sending (E - 1)/E of each. Counted by hand:
//   E = 2: 3 layers x (32 + 4 x 8,192) = 98,400 bytes, 15 calls
//   E = 4: 3 layers x (48 + 4 x 12,288) = 147,600 bytes, 15 calls
// full AC recomputes the forward's 3 per layer (32 + 2 x 8,192 bytes at E = 2): 24 calls;
// --accum 2 doubles every figure.
// Every run is --check'ed and audited (the exchanges leave the parameters' math unchanged).
engine::RunResult run_with_tokens(int ep, work::AcPolicy ac, int accum = 1,
                                  Method method = Method::dmuon) {
  test::PlanOptions po;
  po.topology = "moe-llm";
  po.ep = ep;
  const auto s = test::make_plan_setup(po);
  const model::Topology whole = model::build_topology("moe-llm", "tiny", {});
  work::RunShape shape;
  shape.seq_len = 16;
  shape.micro_batch = 1;
  shape.dtype = kernels::Dtype::f32;
  shape.ac = ac;
  shape.ep.size = ep;
  engine::EngineOptions o;
  o.step.method = method;
  o.step.global_tokens = 16;
  o.step.accum = accum;
  o.step.activation = engine::in_tree_of(
      *engine::activation_work(work::build_step_work(whole, shape)), whole.tree, s.topo.tree);
  o.run.steps = 2;
  o.run.warmup = 0;
  o.run.check = true;
  return engine::run_engine(s.topo.tree, s.plan, o, MPI_COMM_WORLD);
}

engine::KindResult token_channel(const engine::RunResult& r) {
  return r.kinds[engine::channel_index(CommGroup::ep, comm::CollectiveKind::all_to_all)];
}

TEST(EpEngine, TokenAllToAllsRunAndAreAudited) {
  const int n = test::world_size();
  if (n != 2 && n != 4) GTEST_SKIP() << "2 ranks (E = 2 = G) and 4 (E = 2 < G, E = 4 = G)";
  struct Case {
    int ep;
    std::int64_t bytes;
  };
  std::vector<Case> cases = {{2, 98400}};
  if (n == 4) cases.push_back({4, 147600});
  for (const auto& c : cases) {
    SCOPED_TRACE("--ep " + std::to_string(c.ep));
    const auto r = run_with_tokens(c.ep, work::AcPolicy::none);
    expect_checked(r);
    EXPECT_EQ(token_channel(r).calls_per_step, 15);
    EXPECT_EQ(token_channel(r).bytes_measured, c.bytes);
    EXPECT_EQ(token_channel(r).bytes_formula, c.bytes);
  }
  const auto full = run_with_tokens(2, work::AcPolicy::full, 2, Method::fsdp_adamw);
  expect_checked(full);
  EXPECT_EQ(token_channel(full).calls_per_step, 2 * 24);
  EXPECT_EQ(token_channel(full).bytes_measured, 2 * (98400 + 3 * (32 + 2 * 8192)));
}

}  // namespace
