// Tensor parallelism in the engine (docs/METRICS.md "Tensor parallelism"): dmuon with --tp T
// on R x G x T ranks passes --check against the one-process TP reference, its DP and TP bytes
// equal the formula on every rank (the engine's audit), and the TP gather/scatter volume
// recomputed here from the plan's TP owners, per rank, matches the maximum the run reports;
// with --clip-norm (2-norm and inf) as well, the norm taken over the whole world, and with
// --accum K (micro-steps; the TP exchange once per step) and --comm-dtype bf16.
// World sizes that T does not divide skip with the reason.

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <functional>
#include <string>

#include "dmuon/base/error.hpp"
#include "dmuon/engine/engine.hpp"
#include "kokkos_environment.hpp"
#include "mpi_test_util.hpp"
#include "plan_setup.hpp"
#include "test_plan_options.hpp"

namespace {

using namespace dmuon;

using Setup = test::PlanSetup;

Setup make_setup(int tp, int replicate, plan::Reshard reshard) {
  test::PlanOptions po;
  po.topology = "llm";
  po.tp = tp;
  po.replicate = replicate;
  po.reshard = reshard;
  return test::make_plan_setup(po);
}

engine::EngineOptions options(plan::Reshard reshard) {
  engine::EngineOptions o;
  o.step.method = engine::Method::dmuon;
  o.step.reshard = reshard;
  o.step.global_tokens = 8;
  o.run.steps = 2;
  o.run.warmup = 0;
  o.run.seed = 11;
  o.run.check = true;
  return o;
}

// Max over world ranks w = dp*T + t of sum over TP-sharded p with DP owner dp and TP owner
// != t of |p|/T * 4 bytes: what every non-owner sends in the gather and receives in the
// scatter (fp32).
std::int64_t expected_tp_max(const Setup& s) {
  const int T = s.plan.tp.tp;
  std::vector<std::int64_t> per(static_cast<std::size_t>(test::world_size()), 0);
  for (int pid : s.plan.tp.sharded) {
    const int dp = s.plan.partition.owner_rank(pid);
    for (int t = 0; t < T; ++t)
      if (t != s.plan.tp.tp_owner[static_cast<std::size_t>(pid)])
        per[static_cast<std::size_t>(dp * T + t)] += s.topo.tree.parameter(pid).numel() / T * 4;
  }
  return *std::max_element(per.begin(), per.end());
}

// `adjust` sets the case's options beyond the defaults (clip, accum).
void run_case(int tp, int replicate, plan::Reshard reshard,
              const std::function<void(engine::EngineOptions&)>& adjust = {}) {
  const int n = test::world_size();
  if (n % (tp * replicate) != 0)
    GTEST_SKIP() << "world " << n << " is not divisible by R x T = " << replicate << " x " << tp;
  const auto s = make_setup(tp, replicate, reshard);
  ASSERT_EQ(s.plan.tp.sharded.size(), 28u);  // llm tiny: 4 layers x q, k, v, o, gate, up, down
  auto o = options(reshard);
  if (adjust) adjust(o);
  const auto r = engine::run_engine(s.topo.tree, s.plan, o, MPI_COMM_WORLD);
  EXPECT_EQ(r.tp, tp);
  EXPECT_EQ(r.world_size, n);
  EXPECT_TRUE(r.audit_ok) << r.audit_message;
  EXPECT_TRUE(r.checked);
  EXPECT_TRUE(r.check_passed) << "max rel error " << r.max_rel_error << " at " << r.worst_param
                              << " " << r.check_note;
  // The TP bytes of one step (the last) are those of one exchange per TP-sharded parameter
  // whatever --accum: the optimizer, and so the exchange, runs once per step. The gather
  // carries the wire dtype (bf16: half the fp32 bytes), the scatter fp32.
  const std::int64_t tp_max = expected_tp_max(s);
  const std::int64_t gather_max = o.step.wire == kernels::Dtype::bf16 ? tp_max / 2 : tp_max;
  EXPECT_GT(tp_max, 0);
  const auto& gather = r.kinds[engine::channel_index(CommGroup::tp, comm::CollectiveKind::gather)];
  const auto& scatter =
      r.kinds[engine::channel_index(CommGroup::tp, comm::CollectiveKind::scatter)];
  EXPECT_EQ(gather.bytes_measured, gather_max);
  EXPECT_EQ(scatter.bytes_measured, tp_max);
  EXPECT_EQ(gather.bytes_formula, gather_max);
  EXPECT_EQ(scatter.bytes_formula, tp_max);
  // --clip-norm: one all-reduce of the norm over the whole R x G x T world, 0 bytes.
  const auto& norm =
      r.kinds[engine::channel_index(engine::CommGroup::world, comm::CollectiveKind::all_reduce)];
  EXPECT_EQ(norm.calls_per_step, o.step.clip_norm > 0 ? 1 : 0);
  if (o.step.clip_norm > 0) {
    EXPECT_EQ(norm.group_size, n);
  }
}

TEST(TpEngine, Tp2Z3) {
  run_case(2, 1, plan::Reshard::z3);
}
TEST(TpEngine, Tp2Z2) {
  run_case(2, 1, plan::Reshard::z2);
}
TEST(TpEngine, Tp4Z3) {
  run_case(4, 1, plan::Reshard::z3);
}
TEST(TpEngine, Tp2Hsdp) {
  run_case(2, 2, plan::Reshard::z3);
}

// --clip-norm with --tp: the norm of the logical model (every TP shard once, every other
// parameter once, not T times) equals the one-process reference's; 0.05 is far below the
// synthetic gradients' norm, so every step clips (a norm counted wrong changes every update).
TEST(TpEngine, Tp2ClipNorm) {
  run_case(2, 1, plan::Reshard::z3, [](auto& o) { o.step.clip_norm = 0.05; });
}
TEST(TpEngine, Tp2HsdpClipNormInf) {
  run_case(2, 2, plan::Reshard::z3, [](auto& o) {
    o.step.clip_norm = 0.01;
    o.step.clip_norm_type = engine::ClipNormType::inf;
  });
}

// --accum K with --tp: K micro-steps of the DP step on the local shards (weights collectives
// K times, reduces once: the engine's audit against the accumulated formula), one TP exchange
// per step after the last micro-step; --check against the TP reference accumulating the same
// micro-batches.
TEST(TpEngine, Tp2Accum2Z3) {
  run_case(2, 1, plan::Reshard::z3, [](auto& o) { o.step.accum = 2; });
}
TEST(TpEngine, Tp2Accum3Z2) {
  run_case(2, 1, plan::Reshard::z2, [](auto& o) { o.step.accum = 3; });
}
TEST(TpEngine, Tp2HsdpAccum2ClipNorm) {
  run_case(2, 2, plan::Reshard::z3, [](auto& o) {
    o.step.clip_norm = 0.05;
    o.step.accum = 2;
  });
}

// --comm-dtype bf16 with --tp: the DP collectives on the bf16 wire as without TP (the audit),
// the TP gather of the bf16-rounded Nesterov-input shards (half the bytes), the fp32 scatter;
// --check against the TP reference rounding the same shards, within the bf16 tolerance
// (engine_options.cpp: 8 unit roundoffs), on full-rank gradients (64 samples, as
// ddp_dmuon_mpi_test's bf16 case) so that the check is meaningful.
TEST(TpEngine, Tp2Bf16) {
  run_case(2, 1, plan::Reshard::z3, [](auto& o) {
    o.step.wire = kernels::Dtype::bf16;
    o.step.global_tokens = 64;
  });
}
TEST(TpEngine, Tp2HsdpBf16Accum2) {
  run_case(2, 2, plan::Reshard::z3, [](auto& o) {
    o.step.wire = kernels::Dtype::bf16;
    o.step.global_tokens = 64;
    o.step.accum = 2;
  });
}

TEST(TpEngine, UnsupportedCombinationsExit2) {
  const int n = test::world_size();
  if (n % 2 != 0) GTEST_SKIP() << "world " << n << " is not divisible by --tp 2";
  const auto s = make_setup(2, 1, plan::Reshard::z3);
  auto o = options(plan::Reshard::z3);
  o.step.method = engine::Method::fsdp_muon;
  EXPECT_THROW(engine::validate_run(s.topo.tree, s.plan, o, n), InputError);
  o = options(plan::Reshard::z3);
  o.step.wire = kernels::Dtype::bf16;
  EXPECT_NO_THROW(engine::validate_run(s.topo.tree, s.plan, o, n));
  o = options(plan::Reshard::z3);
  o.backend.device = engine::Device::cuda;  // the CUDA backend runs the TP exchange too
  EXPECT_NO_THROW(engine::validate_run(s.topo.tree, s.plan, o, n));
  o = options(plan::Reshard::z3);
  o.step.accum = 2;
  EXPECT_NO_THROW(engine::validate_run(s.topo.tree, s.plan, o, n));
}

}  // namespace
