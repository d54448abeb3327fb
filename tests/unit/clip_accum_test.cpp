// --clip-norm and --accum without MPI: parsing (bad values are InputError), the clip
// coefficient of torch.nn.utils.clip_grad_norm_, the elements each rank counts in the norm
// (every element of every parameter exactly once over the world, for every method, 1-D and
// HSDP), the micro-batch sample split, and the schedules' op counts and order written out by
// hand.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "dmuon/base/error.hpp"
#include "dmuon/engine/step/accumulation.hpp"
#include "dmuon/engine/step/grad_clip.hpp"
#include "dmuon/engine/step/step_schedule.hpp"
#include "dmuon/engine/step/step_volume.hpp"
#include "llm_tp_plan.hpp"
#include "test_plan_options.hpp"

namespace {

using namespace dmuon;
using engine::Method;
using engine::Op;

TEST(ClipNorm, ParsesPositiveFiniteNumbersOnly) {
  EXPECT_EQ(engine::parse_clip_norm("1.0"), 1.0);
  EXPECT_EQ(engine::parse_clip_norm("0.25"), 0.25);
  EXPECT_EQ(engine::parse_clip_norm("1e-3"), 1e-3);
  for (const char* bad : {"0", "0.0", "-1", "-0.5", "abc", "", "1x", " 1", "nan", "inf", "1e400"})
    EXPECT_THROW(engine::parse_clip_norm(bad), InputError) << "'" << bad << "'";
  EXPECT_EQ(engine::parse_clip_norm_type("2"), engine::ClipNormType::two);
  EXPECT_EQ(engine::parse_clip_norm_type("inf"), engine::ClipNormType::inf);
  for (const char* bad : {"", "1", "3", "Inf", "two"})
    EXPECT_THROW(engine::parse_clip_norm_type(bad), InputError) << "'" << bad << "'";
}

TEST(ClipNorm, CoefficientIsClipGradNormsClampedRatio) {
  // torch: clip_coef = max_norm / (total_norm + 1e-6), clamped to 1.
  EXPECT_FLOAT_EQ(engine::clip_coefficient(1.0, 3.0), 1.0f / (3.0f + 1e-6f));
  EXPECT_FLOAT_EQ(engine::clip_coefficient(0.5, 4.0), 0.125f);
  EXPECT_EQ(engine::clip_coefficient(10.0, 3.0), 1.0f);
  EXPECT_EQ(engine::clip_coefficient(1.0, 0.0), 1.0f);  // zero gradients: nothing to scale
  EXPECT_TRUE(std::isnan(engine::clip_coefficient(1.0, std::nan(""))));
}

TEST(ClipNorm, PartialsAreSumOfSquaresOrMax) {
  const float a[] = {3.0f, -4.0f}, b[] = {-12.0f};
  double two = 0, inf = 0;
  engine::clip_accumulate(engine::ClipNormType::two, a, 2, two);
  engine::clip_accumulate(engine::ClipNormType::two, b, 1, two);
  EXPECT_EQ(two, 169.0);  // 9 + 16 + 144
  EXPECT_EQ(engine::clip_total_norm(engine::ClipNormType::two, two), 13.0);
  engine::clip_accumulate(engine::ClipNormType::inf, a, 2, inf);
  engine::clip_accumulate(engine::ClipNormType::inf, b, 1, inf);
  EXPECT_EQ(engine::clip_total_norm(engine::ClipNormType::inf, inf), 12.0);
}

// Over every rank of the world, each parameter's elements are counted exactly once (and only
// on ranks that update the parameter, where the reduced gradient exists).
TEST(ClipNorm, EveryElementCountedOnceOverTheWorld) {
  for (const char* topology : {"moe", "llm"})
    for (auto m : {Method::dmuon, Method::fsdp_adamw, Method::fsdp_muon, Method::ddp_muon})
      for (auto [world, replicate] : {std::pair{1, 1}, {3, 1}, {4, 2}, {8, 2}, {6, 3}}) {
        test::PlanOptions po;
        po.topology = topology;
        po.replicate = replicate;
        const auto topo = test::load_topology(po);
        const auto plan = plan::make_plan(topo.tree, test::make_plan_config(po, topo, world));
        std::map<int, std::vector<int>> seen;  // pid -> count per element
        for (int pid : topo.tree.parameter_order())
          seen[pid].assign(static_cast<std::size_t>(topo.tree.parameter(pid).numel()), 0);
        for (int r = 0; r < world; ++r) {
          const auto L = engine::make_layout(topo.tree, plan, {m, plan::Reshard::z3, 1}, r);
          for (const auto& p : L.params) {
            const auto span = engine::clip_counted(L, p);
            if (span.count == 0) continue;
            ASSERT_TRUE(p.updated_here) << p.name;
            // Sharded spans are relative to the shard; make them global.
            const std::int64_t base =
                p.storage == engine::Storage::sharded ? L.me.column() * p.chunk : 0;
            for (std::int64_t i = 0; i < span.count; ++i)
              ++seen[p.pid][static_cast<std::size_t>(base + span.begin + i)];
          }
        }
        for (const auto& [pid, counts] : seen)
          for (std::size_t i = 0; i < counts.size(); ++i)
            ASSERT_EQ(counts[i], 1)
                << topology << " " << engine::method_name(m) << " N=" << world << " R=" << replicate
                << " " << topo.tree.parameter(pid).name << "[" << i << "]";
      }
}

// --tp T: over the R x G x T world, every element of the LOGICAL model is counted once: each of
// a TP-sharded parameter's T shards by its own TP index (element (t, i) = shard t's i-th), every
// other parameter (held whole at every TP index) by one TP index only. Under --check alone this
// is invisible (Muon and AdamW hardly change with a global gradient scale), hence the count.
TEST(ClipNorm, TensorParallelCountsTheLogicalModelOnce) {
  for (auto [world, replicate, tp] : {std::tuple{2, 1, 2}, {4, 1, 2}, {8, 2, 2}, {8, 1, 4}}) {
    const auto setup = test::llm_tp_plan(world, replicate, tp);
    const auto& topo = setup.topo;
    const auto& plan = setup.plan;
    const auto& local = setup.local;
    std::map<int, std::vector<int>> seen;  // pid -> count per logical element
    for (int pid : topo.tree.parameter_order())
      seen[pid].assign(static_cast<std::size_t>(topo.tree.parameter(pid).numel()), 0);
    for (int w = 0; w < world; ++w) {
      const int t = w % tp;
      const auto L = engine::make_layout(local, plan, {Method::dmuon, plan::Reshard::z3, 1}, w);
      for (const auto& p : L.params) {
        const auto span = engine::clip_counted(L, p);
        if (span.count == 0) continue;
        ASSERT_TRUE(p.updated_here) << p.name;
        const std::int64_t base =
            (p.storage == engine::Storage::sharded ? L.me.column() * p.chunk : 0) +
            (p.tp_sharded() ? t * p.numel : 0);
        for (std::int64_t i = 0; i < span.count; ++i)
          ++seen[p.pid][static_cast<std::size_t>(base + span.begin + i)];
      }
    }
    for (const auto& [pid, counts] : seen)
      for (std::size_t i = 0; i < counts.size(); ++i)
        ASSERT_EQ(counts[i], 1) << "N=" << world << " R=" << replicate << " T=" << tp << " "
                                << topo.tree.parameter(pid).name << "[" << i << "]";
  }
}

TEST(Accum, ParsesIntegersInRange) {
  EXPECT_EQ(engine::parse_accum("1"), 1);
  EXPECT_EQ(engine::parse_accum("8"), 8);
  EXPECT_EQ(engine::parse_accum("1024"), 1024);
  for (const char* bad : {"0", "-2", "x", "", "2.5", "1025", " 2", "+3", "99999999999999999999"})
    EXPECT_THROW(engine::parse_accum(bad), InputError) << "'" << bad << "'";
}

TEST(Accum, MicroBatchesSplitTheStepsSamples) {
  // n = 10 samples, K = 3 micro-batches [0,3) [3,6) [6,10), 2 ranks each half of one.
  using engine::micro_sample_range;
  const auto r00 = micro_sample_range(10, 0, 3, 0, 2), r01 = micro_sample_range(10, 0, 3, 1, 2);
  EXPECT_EQ(r00.begin, 0);
  EXPECT_EQ(r00.end, 1);
  EXPECT_EQ(r01.begin, 1);
  EXPECT_EQ(r01.end, 3);
  const auto r20 = micro_sample_range(10, 2, 3, 0, 2), r21 = micro_sample_range(10, 2, 3, 1, 2);
  EXPECT_EQ(r20.begin, 6);
  EXPECT_EQ(r20.end, 8);
  EXPECT_EQ(r21.begin, 8);
  EXPECT_EQ(r21.end, 10);
  EXPECT_EQ(r21.n, 10);  // the loss scale stays the step's samples
  // K = 1 is the plain split.
  const auto whole = micro_sample_range(10, 0, 1, 1, 4);
  EXPECT_EQ(whole.begin, 2);
  EXPECT_EQ(whole.end, 5);
}

TEST(Accum, HookFormula) {
  // 2 sites: 8 hooks fire per micro-step; Z3 6 communicate (forward-pre, backward-pre,
  // backward-post per site), Z2 4. With K = 3: 24 fire; Z3 3·4 + 2 = 14, Z2 3·2 + 2 = 8.
  model::ModuleTree tree("M");
  const int list = tree.add_module(0, "layers", "ModuleList");
  for (int i = 0; i < 2; ++i)
    tree.add_linear(tree.add_module(list, std::to_string(i), "L"), "fc", 4, 4);
  tree.finalize();
  plan::PlanConfig c;
  c.dedicate_rule = "all";
  c.partition.shard = 2;
  const auto p = plan::make_plan(tree, c);
  ASSERT_EQ(p.hooks.sites.size(), 2u);
  using Hooks = std::pair<std::int64_t, std::int64_t>;  // fired, communicating
  const auto hooks = [&](Method m, plan::Reshard reshard, int accum) {
    engine::VolumeOptions o;
    o.method = m;
    o.reshard = reshard;
    o.accum = accum;
    const auto v = engine::predict_step_volume(tree, p, o);
    return Hooks{v.hooks_fired, v.hooks_communicating};
  };
  EXPECT_EQ(hooks(Method::dmuon, plan::Reshard::z3, 3), (Hooks{24, 14}));
  EXPECT_EQ(hooks(Method::dmuon, plan::Reshard::z2, 3), (Hooks{24, 8}));
  EXPECT_EQ(hooks(Method::dmuon, plan::Reshard::z3, 1), (Hooks{8, 6}));
  // The other methods have no reference hooks to audit (ddp-dmuon's owners included).
  EXPECT_EQ(hooks(Method::ddp_dmuon, plan::Reshard::z3, 3), (Hooks{0, 0}));
}

struct Counts {
  std::map<Op, int> ops;
  std::map<int, int> backward_accumulating;  // micro -> backward ops with accumulate
};

Counts count(const engine::Schedule& s) {
  Counts c;
  for (const auto& op : s) {
    ++c.ops[op.op];
    if (op.op == Op::backward && op.accumulate) ++c.backward_accumulating[op.micro];
  }
  return c;
}

// sequential (tiny): weight comm groups, members; counts of one micro-step from the K = 1
// schedule, the K-step one must repeat forward/backward K times and reduce once.
TEST(Accum, ScheduleRepeatsMicroStepsAndReducesOnce) {
  for (auto m : {Method::dmuon, Method::fsdp_muon, Method::ddp_muon})
    for (auto rs : {plan::Reshard::z3, plan::Reshard::z2}) {
      test::PlanOptions po;
      po.topology = "moe";
      po.reshard = rs;
      const auto topo = test::load_topology(po);
      const auto plan = plan::make_plan(topo.tree, test::make_plan_config(po, topo, 2));
      const auto L1 = engine::make_layout(topo.tree, plan, {m, rs, 1}, 1);
      const auto L4 = engine::make_layout(topo.tree, plan,
                                          {m, rs, 1, engine::OptimizerPipeline::per_group, 4}, 1);
      engine::StepSpec o1, o4;
      o4.accum = 4;
      const auto c1 = count(engine::make_schedule(L1, o1));
      const auto c4 = count(engine::make_schedule(L4, o4));
      const std::string what = std::string(engine::method_name(m)) + " " + plan::reshard_name(rs);
      for (Op op : {Op::forward, Op::backward, Op::issue_weights, Op::wait_weights, Op::hook})
        EXPECT_EQ(c4.ops.count(op) ? c4.ops.at(op) : 0, 4 * (c1.ops.count(op) ? c1.ops.at(op) : 0))
            << what << " " << engine::op_name(op);
      for (Op op : {Op::issue_reduce, Op::wait_reduce, Op::prepare, Op::newton_schulz, Op::apply})
        EXPECT_EQ(c4.ops.count(op) ? c4.ops.at(op) : 0, c1.ops.count(op) ? c1.ops.at(op) : 0)
            << what << " " << engine::op_name(op);
      // Micro-steps 1..3 accumulate every backward; micro-step 0 overwrites.
      const int per_micro = c1.ops.at(Op::backward);
      EXPECT_EQ(c4.backward_accumulating.count(0), 0u) << what;
      for (int j = 1; j < 4; ++j) EXPECT_EQ(c4.backward_accumulating.at(j), per_micro) << what;
      // Every group keeps its own gradient slot.
      EXPECT_EQ(L4.grad_window, static_cast<int>(L4.groups.size())) << what;
    }
}

TEST(ClipNorm, ScheduleReducesFirstThenOneWorldAllReduceThenOptimizer) {
  for (auto m : {Method::dmuon, Method::fsdp_adamw, Method::fsdp_muon, Method::ddp_muon}) {
    test::PlanOptions po;
    po.topology = "moe";
    po.replicate = 2;
    const auto topo = test::load_topology(po);
    const auto plan = plan::make_plan(topo.tree, test::make_plan_config(po, topo, 4));
    for (int r = 0; r < 4; ++r) {
      const auto L = engine::make_layout(topo.tree, plan, {m, plan::Reshard::z3, 1}, r);
      engine::StepSpec o;
      o.clip_norm = 1;
      const auto s = engine::make_schedule(L, o);
      std::vector<std::size_t> at_issue;
      std::size_t last_reduce_wait = 0, first_optimizer = s.size();
      for (std::size_t i = 0; i < s.size(); ++i) {
        const Op op = s[i].op;
        if (op == Op::issue_clip) at_issue.push_back(i);
        if (op == Op::wait_reduce || op == Op::wait_stage2) last_reduce_wait = i;
        if ((op == Op::prepare || op == Op::newton_schulz || op == Op::apply) &&
            first_optimizer == s.size())
          first_optimizer = i;
      }
      ASSERT_EQ(at_issue.size(), 1u) << engine::method_name(m) << " rank " << r;
      const std::size_t k = at_issue[0];
      EXPECT_EQ(s[k - 1].op, Op::clip_partial);
      EXPECT_EQ(s[k + 1].op, Op::wait_clip);
      EXPECT_EQ(s[k + 2].op, Op::clip_scale);
      EXPECT_LT(last_reduce_wait, k) << engine::method_name(m) << " rank " << r;
      EXPECT_LT(k + 2, first_optimizer) << engine::method_name(m) << " rank " << r;
      const auto calls = engine::collectives_of(L, s[k], o);
      ASSERT_EQ(calls.size(), 1u);
      EXPECT_EQ(calls[0].kind, comm::CollectiveKind::all_reduce);
      EXPECT_EQ(s[k].comm, engine::CommGroup::world);
      EXPECT_EQ(calls[0].count, 1);
      EXPECT_EQ(calls[0].dtype, comm::DType::f32);
      EXPECT_EQ(calls[0].op, engine::CollectiveCall::Reduce::sum);
    }
  }
}

}  // namespace
