// The step schedule on its own (no MPI): for every method, layout and option the engine runs,
// built for every rank of the world,
//   - each communicator (a row, a column, the DDP world) sees the same sequence of collectives
//     (kind, count, dtype, root) from every one of its ranks, in the same order;
//   - the collectives a rank's schedule issues in one step add up to the calls and bytes of
//     the closed-form formula (step_volume.hpp / plan/volume_terms.hpp, written independently);
//   - hook ops add up to the hook formula (Z3 four per site, Z2 two);
//   - no pool slot is used by two groups at once, and Z3 never holds more than prefetch + 1
//     groups' weights;
//   - every issued batch is waited within the step (the replicate broadcasts at the next one);
//     with FSDP2's rule (StepSpec::fsdp2) no two FSDP reduces are in flight at once.
// Plus hand-built cases whose op sequences are written out in full, and --tp: each TP group's
// ranks issue the same TP gathers and scatters in the same order, adding up to the TP formula.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "dmuon/base/error.hpp"
#include "dmuon/engine/step/accumulation.hpp"
#include "dmuon/engine/step/activation_work.hpp"
#include "dmuon/engine/step/step_schedule.hpp"
#include "dmuon/engine/step/step_volume.hpp"
#include "dmuon/engine/step/synthetic.hpp"
#include "dmuon/model/expert_local_tree.hpp"
#include "dmuon/plan/comm_volume.hpp"
#include "dmuon/plan/tp_local_tree.hpp"
#include "dmuon/plan/tp_volume.hpp"
#include "llm_tp_plan.hpp"
#include "test_plan_options.hpp"

namespace {

using namespace dmuon;
using engine::CollectiveCall;
using engine::CommGroup;
using engine::Method;
using engine::Op;
using engine::StepOp;

struct Case {
  std::string topology;
  int world = 1;
  int replicate = 1;
  Method method = Method::dmuon;
  plan::Reshard reshard = plan::Reshard::z3;
  int prefetch = 1;
  plan::GradReduce grad_reduce = plan::GradReduce::per_param;
  engine::OptimizerPipeline pipeline = engine::OptimizerPipeline::per_group;
  comm::DType wire = comm::DType::f32;
  comm::DType reduce = comm::DType::f32;  ///< --reduce-dtype (gradients)
  bool no_pack = false;  ///< every parameter its own partition unit: several owners per site
  std::string strategy = "lpt";
  std::vector<std::string> routes;  ///< --route items
  int accum = 1;                    ///< --accum micro-steps
  bool clip = false;                ///< --clip-norm
  bool fsdp2 = false;               ///< StepSpec::fsdp2 (the projection's GPU FSDP groups)
  engine::DmuonSchedule dmuon_schedule = engine::DmuonSchedule::reference;
  int ep = 1;  ///< --ep (E = the world: each rank's own experts)

  std::string name() const {
    std::ostringstream s;
    s << topology << " N=" << world << " R=" << replicate << " " << engine::method_name(method)
      << " " << plan::reshard_name(reshard) << " prefetch " << prefetch << " "
      << plan::grad_reduce_name(grad_reduce) << " " << engine::optimizer_pipeline_name(pipeline)
      << " " << comm::dtype_name(wire) << "/" << comm::dtype_name(reduce) << " " << strategy
      << (no_pack ? " no-pack" : "") << " accum " << accum << (clip ? " clip" : "")
      << (fsdp2 ? " fsdp2" : "") << " " << engine::dmuon_schedule_name(dmuon_schedule)
      << (ep > 1 ? " ep " + std::to_string(ep) : "");
    for (const auto& r : routes) s << " route " << r;
    return s.str();
  }
};

struct Built {
  model::Topology topo;
  plan::Plan plan;
  engine::StepSpec options;
  std::vector<engine::StepLayout> layouts;  // by world rank
  std::vector<engine::Schedule> schedules;
};

Built build(const Case& c) {
  test::PlanOptions po;
  po.topology = c.topology;
  po.replicate = c.replicate;
  po.no_pack = c.no_pack;
  po.reshard = c.reshard;
  po.owner_strategy = c.strategy;
  po.routes = c.routes;
  po.ep = c.ep;
  Built b{test::load_topology(po), {}, {}, {}, {}};
  b.plan = plan::make_plan(b.topo.tree, test::make_plan_config(po, b.topo, c.world));
  b.options.prefetch = c.prefetch;
  b.options.grad_reduce = c.grad_reduce;
  b.options.method = c.method;
  b.options.reshard = c.reshard;
  b.options.pipeline = c.pipeline;
  b.options.wire = c.wire == comm::DType::bf16 ? kernels::Dtype::bf16 : kernels::Dtype::f32;
  b.options.reduce = c.reduce == comm::DType::bf16 ? kernels::Dtype::bf16 : kernels::Dtype::f32;
  b.options.accum = c.accum;
  b.options.clip_norm = c.clip ? 1 : 0;
  b.options.fsdp2 = c.fsdp2;
  b.options.dmuon_schedule = c.dmuon_schedule;
  for (int r = 0; r < c.world; ++r) {
    b.layouts.push_back(engine::make_layout(b.topo.tree, b.plan, b.options, r));
    b.schedules.push_back(engine::make_schedule(b.layouts.back(), b.options));
  }
  return b;
}

// One collective as the other ranks of its communicator see it.
using Signature = std::tuple<int, std::int64_t, int, int>;  // kind, count, dtype, root

// The communicator instance a rank's group maps to: rows by row index, columns by column.
std::string comm_key(const engine::StepLayout& L, CommGroup g) {
  if (g == CommGroup::world) return "world";
  if (g == CommGroup::shard) return "row " + std::to_string(L.me.row());
  return "column " + std::to_string(L.me.column());
}

// The communicator an issue op must run on (SPEC §6 and docs/METRICS.md): the clip norm over
// the world, HSDP stage 2 and the owners' column broadcast over the replicate group (ddp-dmuon's
// post-step broadcast over its one group of all ranks), the TP exchange over the TP group.
CommGroup expected_comm(const engine::StepLayout& L, Op op) {
  switch (op) {
    case Op::issue_clip: return CommGroup::world;
    case Op::issue_stage2: return CommGroup::replicate;
    case Op::publish:
      return L.method == Method::ddp_dmuon ? CommGroup::shard : CommGroup::replicate;
    case Op::tp_gather:
    case Op::tp_scatter: return CommGroup::tp;
    default: return CommGroup::shard;
  }
}

// Varies the options along the sweep rather than as a full product (case number k).
void vary(Case& c, int k) {
  // Vary the remaining options along the sweep rather than as a full product.
  c.grad_reduce = k % 2 ? plan::GradReduce::packed : plan::GradReduce::per_param;
  c.pipeline = k % 3 == 1 ? engine::OptimizerPipeline::all_then_publish
                          : engine::OptimizerPipeline::per_group;
  c.wire = k % 5 == 2 ? comm::DType::bf16 : comm::DType::f32;
  // --reduce-dtype: gradients in the other type on every seventh case (both ways).
  c.reduce = k % 7 != 2                   ? c.wire
             : c.wire == comm::DType::f32 ? comm::DType::bf16
                                          : comm::DType::f32;
  // Unpacked units spread a site's parameters over several owners (several packed
  // broadcasts per site), which the tiny presets' packed units do not.
  c.no_pack = k % 4 != 0;
  c.strategy = k % 7 == 3 ? "round_robin" : "lpt";
  // Routes: 1-D parameters owner-based with AdamW (or sharded_adamw), embeddings Muon,
  // routers FSDP.
  // Per-route dtypes: routers, embeddings (Muon) and some 1-D parameters in the other
  // type than the wire's, in the alt arenas and (owner-based) pairs of their own.
  const std::string other = c.wire == comm::DType::bf16 ? ":fp32" : ":bf16";
  const std::string router_dtype = (k / 3) % 2 == 0 ? other : "";
  if (k % 3 == 2)
    c.routes = {(k / 3) % 4 == 1   ? "ndim=1=sharded_adamw" + other
                : (k / 3) % 4 == 2 ? std::string("ndim=1=sharded_adamw")
                : (k / 3) % 4 == 3 ? "ndim=1=adamw" + other
                                   : std::string("ndim=1=adamw"),
                "contains:embed=muon" + router_dtype, "contains:router=fsdp" + router_dtype};
  c.accum = k % 6 == 5 ? 3 : 1;
  c.clip = k % 4 == 2;
  c.fsdp2 = k % 8 >= 4;
  c.dmuon_schedule =
      k % 9 < 3 ? engine::DmuonSchedule::overlapped : engine::DmuonSchedule::reference;
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  const Method methods[] = {Method::dmuon, Method::fsdp_adamw, Method::fsdp_muon, Method::ddp_muon,
                            Method::ddp_dmuon};
  for (const char* t : {"moe", "vla", "nested", "sequential", "llm", "moe-llm"})
    for (auto [world, replicate] :
         {std::pair{1, 1}, {2, 1}, {4, 1}, {8, 1}, {4, 2}, {8, 2}, {8, 4}})
      for (Method m : methods)
        for (auto rs : {plan::Reshard::z3, plan::Reshard::z2})
          for (int prefetch : {0, 1, 3}) {
            Case c;
            c.topology = t;
            c.world = world;
            c.replicate = replicate;
            c.method = m;
            c.reshard = rs;
            c.prefetch = prefetch;
            vary(c, static_cast<int>(cases.size()));
            cases.push_back(c);
          }
  // --ep E = G: every rank of a row holds its own 1/E of the routed experts (8 per layer in
  // both tiny presets), outside the owners and the FSDP units.
  for (const char* t : {"moe", "moe-llm"})
    for (int world : {2, 4, 8})
      for (Method m : methods)
        for (auto rs : {plan::Reshard::z3, plan::Reshard::z2}) {
          Case c;
          c.topology = t;
          c.world = world;
          c.method = m;
          c.reshard = rs;
          c.ep = world;
          vary(c, static_cast<int>(cases.size()));
          cases.push_back(c);
        }
  return cases;
}

TEST(StepSchedule, EveryCommunicatorSeesTheSameSequenceOnEveryRank) {
  for (const Case& c : all_cases()) {
    const Built b = build(c);
    // communicator instance -> rank -> its collectives in issue order
    std::map<std::string, std::map<int, std::vector<Signature>>> seen;
    for (int r = 0; r < c.world; ++r) {
      const auto& L = b.layouts[static_cast<std::size_t>(r)];
      auto& row = seen[comm_key(L, CommGroup::shard)][r];
      auto& col = seen[comm_key(L, CommGroup::replicate)][r];
      auto& world = seen[comm_key(L, CommGroup::world)][r];
      for (const StepOp& op : b.schedules[static_cast<std::size_t>(r)]) {
        if (engine::is_issue(op.op)) {
          EXPECT_EQ(op.comm, expected_comm(L, op.op)) << c.name();
        }
        for (const CollectiveCall& call : engine::collectives_of(L, op, b.options)) {
          const Signature sig{static_cast<int>(call.kind), call.count, static_cast<int>(call.dtype),
                              call.root};
          (op.comm == CommGroup::shard   ? row
           : op.comm == CommGroup::world ? world
                                         : col)
              .push_back(sig);
        }
      }
    }
    for (const auto& [key, by_rank] : seen) {
      const auto& first = by_rank.begin()->second;
      for (const auto& [rank, sequence] : by_rank)
        EXPECT_EQ(sequence, first) << c.name() << ": " << key << ", rank " << rank
                                   << " differs from rank " << by_rank.begin()->first;
    }
  }
}

// Every field of an op, for comparing two schedules op for op.
auto fields(const StepOp& op) {
  return std::make_tuple(op.op, op.group, op.param, op.comm, op.weight_base, op.grad_base,
                         op.gather_base, op.phase, op.timed, op.exposed, op.hook, op.communicates,
                         op.micro, op.accumulate);
}

// stream_schedule hands over make_schedule's ops, op for op, in blocks (several, on the
// larger cases: the projection's schedules are thousands of blocks).
TEST(StepSchedule, StreamedIsTheSameSchedule) {
  int multi_block = 0;
  for (const Case& c : all_cases()) {
    const Built b = build(c);
    for (int r = 0; r < c.world; ++r) {
      const auto& expect = b.schedules[static_cast<std::size_t>(r)];
      std::vector<StepOp> got;
      int blocks = 0;
      engine::stream_schedule(b.layouts[static_cast<std::size_t>(r)], b.options,
                              [&](const StepOp* ops, std::size_t count) {
                                EXPECT_GT(count, 0u);
                                got.insert(got.end(), ops, ops + count);
                                ++blocks;
                              });
      ASSERT_EQ(got.size(), expect.size()) << c.name() << ", rank " << r;
      for (std::size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(fields(got[i]), fields(expect[i])) << c.name() << ", rank " << r << ", op " << i;
      multi_block += blocks > 1 ? 1 : 0;
    }
  }
  EXPECT_GT(multi_block, 0);
}

TEST(StepSchedule, CountingItsCollectivesGivesTheFormula) {
  for (const Case& c : all_cases()) {
    const Built b = build(c);
    engine::VolumeOptions vo;
    vo.method = c.method;
    vo.reshard = c.reshard;
    vo.grad_reduce = c.grad_reduce;
    vo.wire_bytes = static_cast<int>(comm::dtype_size(c.wire));
    vo.reduce_bytes = static_cast<int>(comm::dtype_size(c.reduce));
    vo.accum = c.accum;
    vo.clip = c.clip;
    vo.fsdp2 = c.fsdp2 && c.reshard == plan::Reshard::z3;  // the root unit gathered once
    const auto predicted = engine::predict_step_volume(b.topo.tree, b.plan, vo);
    for (int r = 0; r < c.world; ++r) {
      const auto& L = b.layouts[static_cast<std::size_t>(r)];
      const auto expect = predicted.of_rank(r);
      engine::VolumeExpectation counted{};
      // Group sizes and this rank's index in them, for the payload convention.
      const int row_size = L.shards(), col_size = L.replicas();
      for (const StepOp& op : b.schedules[static_cast<std::size_t>(r)])
        for (const CollectiveCall& call : engine::collectives_of(L, op, b.options)) {
          const bool shard = op.comm == CommGroup::shard;
          const bool world = op.comm == CommGroup::world;
          const int me = world ? r : shard ? L.me.column() : L.me.row();
          const auto pay = comm::collective_payload(
              call.kind,
              world   ? c.world
              : shard ? row_size
                      : col_size,
              me == call.root, static_cast<std::size_t>(call.count), comm::dtype_size(call.dtype));
          auto& e = counted[engine::channel_index(op.comm, call.kind)];
          e.calls += 1;
          e.bytes += static_cast<std::int64_t>(comm::collective_volume(call.kind, pay));
        }
      for (std::size_t ch = 0; ch < engine::kChannelCount; ++ch) {
        EXPECT_EQ(counted[ch].calls, expect[ch].calls)
            << c.name() << " rank " << r << " " << engine::channel_name(ch);
        EXPECT_EQ(counted[ch].bytes, expect[ch].bytes)
            << c.name() << " rank " << r << " " << engine::channel_name(ch);
      }
      if (c.method == Method::dmuon) {
        std::int64_t hooks = 0, communicating = 0;
        for (const StepOp& op : b.schedules[static_cast<std::size_t>(r)]) {
          hooks += op.op == Op::hook;
          communicating += op.op == Op::hook && op.communicates;
        }
        EXPECT_EQ(hooks, predicted.hooks_fired) << c.name() << " rank " << r;
        EXPECT_EQ(communicating, predicted.hooks_communicating) << c.name() << " rank " << r;
      }
    }
  }
}

// Intervals [first use, last use] of each pool slot per group occurrence must not overlap.
struct SlotUse {
  int group;
  std::size_t first, last;
};

void expect_no_overlap(const std::map<std::int64_t, std::vector<SlotUse>>& uses,
                       const std::string& pool, const std::string& what) {
  for (const auto& [base, list] : uses)
    for (std::size_t i = 0; i < list.size(); ++i)
      for (std::size_t j = i + 1; j < list.size(); ++j) {
        const auto& a = list[i];
        const auto& b = list[j];
        const bool disjoint = a.last < b.first || b.last < a.first;
        EXPECT_TRUE(disjoint) << what << ": " << pool << " slot at " << base << " used by group "
                              << a.group << " [" << a.first << ", " << a.last << "] and group "
                              << b.group << " [" << b.first << ", " << b.last << "]";
      }
}

TEST(StepSchedule, PoolSlotsAreNeverSharedWhileLive) {
  for (const Case& c : all_cases()) {
    const Built b = build(c);
    for (int r = 0; r < c.world; ++r) {
      const auto& L = b.layouts[static_cast<std::size_t>(r)];
      const auto& S = b.schedules[static_cast<std::size_t>(r)];
      const std::string what = c.name() + " rank " + std::to_string(r);
      // Weights: from pack to release (or the last compute for groups never released).
      std::map<std::int64_t, std::vector<SlotUse>> weights, grads, gathers;
      std::map<int, SlotUse> open_w, open_g, open_ga;
      std::size_t live = 0, max_live = 0;
      for (std::size_t i = 0; i < S.size(); ++i) {
        const StepOp& op = S[i];
        const bool weight_use =
            op.op == Op::pack || op.op == Op::issue_weights || op.op == Op::wait_weights ||
            op.op == Op::forward ||
            (op.op == Op::backward &&
             !engine::computes_on_master(L.groups[static_cast<std::size_t>(op.group)].kind)) ||
            op.op == Op::release_weights;
        if (weight_use && L.groups[static_cast<std::size_t>(op.group)].weight_elems > 0) {
          ASSERT_GE(op.weight_base, 0) << what << " op " << i << " " << engine::op_name(op.op);
          auto it = open_w.find(op.group);
          if (it == open_w.end()) {
            it = open_w.emplace(op.group, SlotUse{op.group, i, i}).first;
            max_live = std::max(max_live, ++live);
          }
          it->second.last = i;
          if (op.op == Op::release_weights) {
            weights[op.weight_base].push_back(it->second);
            open_w.erase(it);
            --live;
          }
        }
        if (op.op == Op::backward && op.grad_base >= 0) {
          auto it = open_g.find(op.group);
          if (it == open_g.end()) it = open_g.emplace(op.group, SlotUse{op.group, i, i}).first;
          it->second.last = i;
        }
        if ((op.op == Op::issue_reduce || op.op == Op::wait_reduce) && open_g.count(op.group)) {
          auto& u = open_g[op.group];
          u.last = i;
          if (op.op == Op::wait_reduce) {
            grads[op.grad_base].push_back(u);
            open_g.erase(op.group);
          }
        }
        if (op.gather_base >= 0) {
          auto it = open_ga.find(op.group);
          if (it == open_ga.end()) it = open_ga.emplace(op.group, SlotUse{op.group, i, i}).first;
          it->second.last = i;
        }
      }
      for (const auto& [g, u] : open_w) weights[S[u.first].weight_base].push_back(u);
      EXPECT_TRUE(open_g.empty()) << what << ": a gradient slot's reduce is never waited";
      for (const auto& [g, u] : open_ga) gathers[S[u.first].gather_base].push_back(u);
      expect_no_overlap(weights, "weight", what);
      expect_no_overlap(grads, "grad", what);
      expect_no_overlap(gathers, "gather", what);
      if (c.reshard == plan::Reshard::z3 && !engine::is_ddp(c.method)) {
        // The ring, and beside it (own slots) FSDP2's root unit when it stays gathered and
        // --ep's experts' compute copies.
        const auto kept = std::count_if(L.groups.begin(), L.groups.end(),
                                        [&](const auto& g) { return L.keeps_own_slot(g); });
        EXPECT_LE(max_live, static_cast<std::size_t>(c.prefetch + 1 + kept)) << what;
      }
      // Every pool offset a schedule uses lies inside the pool.
      for (const StepOp& op : S) {
        const auto& g = L.groups[static_cast<std::size_t>(op.group < 0 ? 0 : op.group)];
        if (op.weight_base >= 0) {
          EXPECT_LE(op.weight_base + g.weight_elems, L.weight_pool_elems) << what;
        }
        if (op.grad_base >= 0) {
          EXPECT_LE(op.grad_base + g.grad_elems, L.grad_pool_elems) << what;
        }
        if (op.gather_base >= 0) {
          EXPECT_LE(op.gather_base + g.gather_elems, L.gather_pool_elems) << what;
        }
      }
    }
  }
}

TEST(StepSchedule, EveryIssuedBatchIsWaitedInTheStep) {
  for (const Case& c : all_cases()) {
    const Built b = build(c);
    for (int r = 0; r < c.world; ++r) {
      std::map<std::pair<int, int>, int> pending;  // (kind, group) -> issued - waited
      const auto& L = b.layouts[static_cast<std::size_t>(r)];
      for (const StepOp& op : b.schedules[static_cast<std::size_t>(r)]) {
        // FSDP2: an FSDP group issues its reduce only when no other FSDP reduce is in flight.
        const auto fsdp2_reduce = [&](int g) {
          return L.fsdp2_reduces(L.groups[static_cast<std::size_t>(g)]);
        };
        if (op.op == Op::issue_reduce && fsdp2_reduce(op.group)) {
          for (const auto& [key, n] : pending) {
            EXPECT_FALSE(key.first == 1 && n > 0 && fsdp2_reduce(key.second))
                << c.name() << " rank " << r << ": group " << op.group << " issued while "
                << key.second << "'s reduce is in flight";
          }
        }
        switch (op.op) {
          case Op::issue_weights: ++pending[{0, op.group}]; break;
          case Op::wait_weights: --pending[{0, op.group}]; break;
          case Op::issue_reduce: ++pending[{1, op.group}]; break;
          case Op::wait_reduce: --pending[{1, op.group}]; break;
          case Op::issue_stage2: ++pending[{2, op.group}]; break;
          case Op::wait_stage2: --pending[{2, op.group}]; break;
          case Op::issue_gather: ++pending[{3, op.group}]; break;
          case Op::wait_gather: --pending[{3, op.group}]; break;
          default: break;
        }
        for (const auto& [key, n] : pending) {
          EXPECT_GE(n, 0) << c.name() << " rank " << r << ": waits before issue";
          EXPECT_LE(n, 1) << c.name() << " rank " << r << ": reissued before waited";
        }
      }
      for (const auto& [key, n] : pending)
        EXPECT_EQ(n, 0) << c.name() << " rank " << r << " kind " << key.first << " group "
                        << key.second << " left in flight";
    }
  }
}

// Every buffer a collective or a compute op touches lies inside its arena (what lets a backend
// allocate exactly the layout's sizes: the CUDA pools have no sanitizer on the GPU).
std::int64_t arena_size(const engine::StepLayout& L, engine::Arena a) {
  switch (a) {
    case engine::Arena::master: return L.master_elems;
    case engine::Arena::grad_arena: return L.grad_arena_elems;
    case engine::Arena::weight_pool: return L.weight_pool_elems;
    case engine::Arena::grad_pool: return L.grad_pool_elems;
    case engine::Arena::gather_pool: return L.gather_pool_elems;
    case engine::Arena::clip_scalar: return 1;
    case engine::Arena::alt_weights: return L.alt_weight_elems;
    case engine::Arena::alt_grads: return L.alt_grad_elems;
    case engine::Arena::alt_gather: return L.alt_gather_elems;
    case engine::Arena::ns_input: return L.state_elems;
    case engine::Arena::tp_send: return L.tp_send_elems();
    case engine::Arena::tp_recv: return L.tp_recv_elems();
    case engine::Arena::tp_matrix: return L.tp_matrix_elems();
  }
  return 0;
}

TEST(StepSchedule, EveryBufferLiesInsideItsArena) {
  for (const Case& c : all_cases()) {
    const Built b = build(c);
    for (int r = 0; r < c.world; ++r) {
      const auto& L = b.layouts[static_cast<std::size_t>(r)];
      const std::string what = c.name() + " rank " + std::to_string(r);
      auto inside = [&](const engine::Location& at, std::int64_t extent, const char* which) {
        EXPECT_GE(at.offset, 0) << what << " " << which;
        EXPECT_LE(at.offset + extent, arena_size(L, at.arena)) << what << " " << which;
      };
      for (const StepOp& op : b.schedules[static_cast<std::size_t>(r)]) {
        for (const CollectiveCall& call : engine::collectives_of(L, op, b.options)) {
          using K = comm::CollectiveKind;
          const int size = L.me.grid.group_size(op.comm);
          const bool root = L.me.member(op.comm) == call.root;
          const bool whole = call.kind == K::all_gather || call.kind == K::reduce_scatter;
          if (call.kind != K::scatter || root)  // a scatter's send buffer is the root's
            inside(engine::locate(L, call.buffer),
                   whole || call.kind == K::scatter ? call.count * size : call.count,
                   engine::op_name(op.op));
          if (call.kind == K::reduce_scatter || call.kind == K::scatter)
            inside(engine::locate(L, call.recv), call.count, "receive");
          if (call.kind == K::gather && root)
            inside(engine::locate(L, call.recv), call.count * size, "gather receive");
        }
        for (const auto& copy : engine::pack_copies(L, op)) {
          inside({engine::Arena::master, copy.master}, copy.count, "pack source");
          inside({copy.to, copy.weight}, copy.count, "pack destination");
        }
        if (op.op == Op::forward || op.op == Op::backward) {
          const auto& p = L.params[static_cast<std::size_t>(op.param)];
          if (p.storage != engine::Storage::replicated || op.weight_base >= 0) {
            inside(
                engine::locate(L, {engine::BufferRef::Kind::weights, -1, op.param, op.weight_base}),
                p.full_elems(), "compute weights");
          }
        }
        if (op.op == Op::backward) {
          const auto& p = L.params[static_cast<std::size_t>(op.param)];
          inside(engine::gradient_location(L, op.param, op.grad_base), p.full_elems(), "gradient");
        }
      }
    }
  }
}

// A hand-built model: two sites layers.0, layers.1 with one parameter each (owned by ranks 0
// and 1 of G = 2) and no non-dedicated parameter. The op sequence of rank 0 is written out.
std::string ops_text(const engine::Schedule& s) {
  std::string out;
  for (const auto& op : s) {
    if (op.op == Op::hook) continue;
    out += engine::op_name(op.op);
    out += "(" + std::to_string(op.group) + (op.param >= 0 ? "," + std::to_string(op.param) : "") +
           ") ";
  }
  return out;
}

// The hand-written cases' plan: two shard ranks (times `replicate` rows), round-robin owners,
// no packing (so each dedicated parameter is its own unit and the owners follow model order).
plan::Plan two_rank_round_robin_plan(const model::ModuleTree& tree, const std::string& dedicate,
                                     const std::vector<std::string>& routes = {},
                                     int replicate = 1) {
  plan::PlanConfig pc;
  pc.dedicate_rule = dedicate;
  pc.routes = routes;
  pc.partition.shard = 2;
  pc.partition.replicate = replicate;
  pc.partition.strategy = partition::parse_strategy("round_robin");
  pc.partition.pack = false;
  return plan::make_plan(tree, pc);
}

// M.layers.0 … layers.(n−1), one 4×4 weight `w` each.
model::ModuleTree square_layers(int n) {
  model::ModuleTree tree("M");
  const int list = tree.add_module(0, "layers", "ModuleList");
  for (int i = 0; i < n; ++i)
    tree.add_parameter(tree.add_module(list, std::to_string(i), "L"), "w", {4, 4});
  tree.finalize();
  return tree;
}

TEST(StepSchedule, TwoSitesTwoOwnersHandWritten) {
  const auto tree = square_layers(2);
  const auto p = two_rank_round_robin_plan(tree, "all");
  engine::StepSpec so;
  so.prefetch = 1;
  // The overlapped schedule (the reference's: ReferenceScheduleHandWritten).
  so.dmuon_schedule = engine::DmuonSchedule::overlapped;
  const auto L = engine::make_layout(tree, p, so, 0);
  ASSERT_EQ(L.groups.size(), 2u);
  EXPECT_EQ(L.params[0].storage, engine::Storage::owned);
  EXPECT_EQ(L.params[1].storage, engine::Storage::remote);
  EXPECT_EQ(ops_text(engine::make_schedule(L, so)),
            // forward: both groups' broadcasts in flight (prefetch 1), group 0 computed first
            "pack(0) issue_weights(0) pack(1) issue_weights(1) wait_weights(0) forward(0,0) "
            "release_weights(0) wait_weights(1) forward(1,1) release_weights(1) "
            // backward: re-broadcast in reverse; reduce of each group right after its compute
            "pack(1) issue_weights(1) pack(0) issue_weights(0) wait_weights(1) backward(1,1) "
            "release_weights(1) issue_reduce(1) wait_weights(0) backward(0,0) "
            "release_weights(0) issue_reduce(0) "
            // optimizer: rank 0 owns only layers.0.w
            "wait_reduce(0) prepare(0) newton_schulz(0,0) apply(0,0) wait_reduce(1) ");
  // Z3 moves each of the 16-element weights twice; the reduce once: rank 0 receives layers.1.
  const auto predicted = engine::predict_step_volume(tree, p, {}).owners;
  EXPECT_EQ(predicted.broadcast.bytes_per_rank[0], 2 * 16 * 4);
  EXPECT_EQ(predicted.reduce.bytes_per_rank[0], 16 * 4);

  // --accum 2 --clip-norm: forward and backward twice (broadcasts each time, the second
  // backward accumulating), the reduces after the second backward only; then every reduce
  // waited, the norm (partial, world all-reduce, wait, scale), and the optimizer.
  so.accum = 2;
  so.clip_norm = 1;
  const auto L2 = engine::make_layout(tree, p, so, 0);
  const std::string micro =
      "pack(0) issue_weights(0) pack(1) issue_weights(1) wait_weights(0) forward(0,0) "
      "release_weights(0) wait_weights(1) forward(1,1) release_weights(1) "
      "pack(1) issue_weights(1) pack(0) issue_weights(0) wait_weights(1) backward(1,1) "
      "release_weights(1) ";
  EXPECT_EQ(ops_text(engine::make_schedule(L2, so)),
            micro + "wait_weights(0) backward(0,0) release_weights(0) " + micro +
                "issue_reduce(1) wait_weights(0) backward(0,0) release_weights(0) "
                "issue_reduce(0) "
                "wait_reduce(0) wait_reduce(1) clip_partial(-1) issue_clip(-1) wait_clip(-1) "
                "clip_scale(-1) prepare(0) newton_schulz(0,0) apply(0,0) ");
  const auto s2 = engine::make_schedule(L2, so);
  int accumulating = 0;
  for (const auto& op : s2) accumulating += op.op == Op::backward && op.accumulate;
  EXPECT_EQ(accumulating, 2);  // the second micro-step's two backward ops
}

// --pp by hand: the passes and the stage boundary's ops of one stage (parameter ops and
// transfers only, "op@micro-batch"). Two micro-batches; stage 0 of 2 warms up with one
// forward (F0 F1 B0 B1), sends after each forward and receives before each backward; stage 1
// of 2 (F0 B0 F1 B1) the other way round. Z2 keeps the weights gathered through stage 0's
// back-to-back backwards: B0 releases nothing, B1 both groups.
std::string pass_text(const engine::Schedule& s) {
  std::string out;
  for (const auto& op : s) {
    const bool p2p = engine::op_traits(op.op).cls == engine::OpClass::p2p;
    if (!p2p && op.op != Op::forward && op.op != Op::backward) continue;
    out += fmt::format("{}@{} ", engine::op_name(op.op), op.micro);
  }
  return out;
}

TEST(StepSchedule, PipelineStagesHandWritten) {
  const auto tree = square_layers(2);
  const auto p = two_rank_round_robin_plan(tree, "all");
  engine::StepSpec so;
  so.accum = 2;
  so.stages = {2, 0, 1, 8};
  const auto L = engine::make_layout(tree, p, so, 0);
  EXPECT_EQ(pass_text(engine::make_schedule(L, so)),
            "forward@0 forward@0 pp_send_activations@0 forward@1 forward@1 "
            "pp_send_activations@1 pp_recv_gradients@0 backward@0 backward@0 "
            "pp_recv_gradients@1 backward@1 backward@1 ");
  so.stages.stage = 1;
  EXPECT_EQ(pass_text(engine::make_schedule(L, so)),
            "pp_recv_activations@0 forward@0 forward@0 backward@0 backward@0 "
            "pp_send_gradients@0 pp_recv_activations@1 forward@1 forward@1 backward@1 "
            "backward@1 pp_send_gradients@1 ");
  for (const auto& op : engine::make_schedule(L, so))
    if (engine::op_traits(op.op).cls == engine::OpClass::p2p) {
      EXPECT_EQ(op.comm, engine::CommGroup::pipeline);
      EXPECT_TRUE(op.exposed);
    }
  so.stages.stage = 0;
  so.reshard = plan::Reshard::z2;
  const auto L2 = engine::make_layout(tree, p, so, 0);
  std::vector<int> released(2, 0);  // per backward micro-batch
  bool in_backward = false;
  for (const auto& op : engine::make_schedule(L2, so)) {
    if (op.op == Op::backward) in_backward = true;
    if (op.op == Op::forward) in_backward = false;
    if (in_backward && op.op == Op::release_weights) ++released[static_cast<std::size_t>(op.micro)];
  }
  EXPECT_EQ(released, (std::vector<int>{0, 2}));
}

// The activation work by hand: layers.0 and layers.1 (one parameter each, two groups) and
// four work units — a stem, the two blocks, a head — each with one op per phase it has
// (block 1 is checkpointed: a recompute op). The stem runs at the first group, a block at the
// group holding its parameter, the head at the last group; forward in unit order after the
// group's forward, backward unit by unit in reverse (recompute, then backward) before the
// group's parameters' backward.
TEST(StepSchedule, ActivationWorkHandWritten) {
  model::ModuleTree tree("M");
  const int list = tree.add_module(0, "layers", "ModuleList");
  std::vector<int> blocks;
  for (int i = 0; i < 2; ++i) {
    blocks.push_back(tree.add_module(list, std::to_string(i), "L"));
    tree.add_parameter(blocks.back(), "w", {4, 4});
  }
  tree.finalize();
  const auto p = two_rank_round_robin_plan(tree, "all");
  work::Op op;
  op.kind = work::OpKind::memory;
  op.bytes_read = op.bytes_written = 64;
  auto act = std::make_shared<engine::ActivationWork>();
  act->units.resize(4);
  act->units[0].forward = {op};  // stem: an embedding lookup
  act->units[0].backward = {op};
  for (int b = 0; b < 2; ++b) {
    auto& u = act->units[static_cast<std::size_t>(b + 1)];
    u.module = blocks[static_cast<std::size_t>(b)];
    u.forward = u.backward = {op};
  }
  act->units[2].recompute = {op};
  act->units[3].head = true;
  act->units[3].forward = act->units[3].backward = {op};
  engine::StepSpec so;
  so.prefetch = 1;
  so.activation = act;
  const auto L = engine::make_layout(tree, p, so, 0);
  EXPECT_EQ(L.activation_group, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(ops_text(engine::make_schedule(L, so)),
            "pack(0) issue_weights(0) pack(1) issue_weights(1) wait_weights(0) forward(0,0) "
            "act_forward(0,0) act_forward(0,1) release_weights(0) wait_weights(1) forward(1,1) "
            "act_forward(1,2) act_forward(1,3) release_weights(1) "
            "pack(1) issue_weights(1) pack(0) issue_weights(0) wait_weights(1) "
            "act_backward(1,3) act_recompute(1,2) act_backward(1,2) backward(1,1) "
            "release_weights(1) issue_reduce(1) wait_weights(0) act_backward(0,1) "
            "act_backward(0,0) backward(0,0) release_weights(0) wait_reduce(1) issue_reduce(0) "
            "wait_reduce(0) prepare(0) newton_schulz(0,0) apply(0,0) ");
}

// --route sharded_adamw by hand: layers.0 {w [4,4], b [4]}, layers.1 {w [4,4], b [3]}, w
// dedicated (round-robin: layers.0.w on rank 0, layers.1.w on rank 1), b sharded_adamw, G = 2.
// Params 0 = layers.0.w, 1 = layers.0.b, 2 = layers.1.w, 3 = layers.1.b. Groups in forward
// order: 0 = site layers.0 (w), 1 = its sharded_adamw group (b), 2 = site layers.1, 3 = b.
// The b groups all-gather like FSDP units (Z3: again in backward) but reduce-scatter after
// the last backward op, in backward order (3 then 1).
TEST(StepSchedule, ShardedAdamwReduceScatterFollowsTheLastBackward) {
  model::ModuleTree tree("M");
  const int list = tree.add_module(0, "layers", "ModuleList");
  for (int i = 0; i < 2; ++i) {
    const int l = tree.add_module(list, std::to_string(i), "L");
    tree.add_parameter(l, "w", {4, 4});
    tree.add_parameter(l, "b", {i == 0 ? 4 : 3});
  }
  tree.finalize();
  const auto p = two_rank_round_robin_plan(tree, "ndim=2", {"ndim=1=sharded_adamw"});
  engine::StepSpec so;
  so.prefetch = 1;
  const auto L = engine::make_layout(
      tree, p, {Method::dmuon, plan::Reshard::z3, 1, engine::OptimizerPipeline::per_group}, 0);
  ASSERT_EQ(L.groups.size(), 4u);
  EXPECT_FALSE(L.groups[0].deferred_reduce);
  EXPECT_TRUE(L.groups[1].deferred_reduce);
  EXPECT_FALSE(L.groups[1].hooked);
  EXPECT_TRUE(L.groups[3].deferred_reduce);
  EXPECT_EQ(L.params[1].storage, engine::Storage::sharded);
  EXPECT_EQ(L.params[1].chunk, 2);  // 4 over 2 ranks
  EXPECT_EQ(L.params[3].chunk, 2);  // 3 padded to 4
  EXPECT_TRUE(L.params[3].grad_persistent);
  const auto s = engine::make_schedule(L, so);
  EXPECT_EQ(ops_text(s),
            "pack(0) issue_weights(0) pack(1) issue_weights(1) wait_weights(0) forward(0,0) "
            "release_weights(0) pack(2) issue_weights(2) wait_weights(1) forward(1,1) "
            "release_weights(1) pack(3) issue_weights(3) wait_weights(2) forward(2,2) "
            "release_weights(2) wait_weights(3) forward(3,3) release_weights(3) "
            // backward: no reduce for the b groups where they run
            "pack(3) issue_weights(3) pack(2) issue_weights(2) wait_weights(3) backward(3,3) "
            "release_weights(3) pack(1) issue_weights(1) wait_weights(2) backward(2,2) "
            "release_weights(2) issue_reduce(2) pack(0) issue_weights(0) wait_weights(1) "
            "backward(1,1) release_weights(1) wait_weights(0) backward(0,0) release_weights(0) "
            // the reference's hook: site 0 waits for site 2's reduce before issuing its own
            "wait_reduce(2) issue_reduce(0) "
            // end of backward: the deferred reduce-scatters
            "issue_reduce(3) issue_reduce(1) "
            // the sites' reduce tail, the sites, then AdamW over the sharded_adamw groups
            "wait_reduce(0) prepare(0) newton_schulz(0,0) apply(0,0) wait_reduce(1) apply(1,1) "
            "wait_reduce(3) apply(3,3) ");
  // The deferred batch: one reduce-scatter(avg) per parameter, chunk 2, into the shard.
  for (const auto& op : s)
    if (op.op == Op::issue_reduce && (op.group == 1 || op.group == 3)) {
      const auto calls = engine::collectives_of(L, op, so);
      ASSERT_EQ(calls.size(), 1u);
      EXPECT_EQ(calls[0].kind, comm::CollectiveKind::reduce_scatter);
      EXPECT_EQ(calls[0].count, 2);
      EXPECT_EQ(op.comm, CommGroup::shard);
    }
  // HSDP (R = 2, G = 2, rank 0): slots are shard-major, so layers.1.w goes to slot 1 = rank 2,
  // in rank 0's column: both sites have stage 2 here (lag 1). Both deferred stage-2
  // all-reduces follow both deferred reduce-scatters, after every owner-based stage 2.
  const auto ph = two_rank_round_robin_plan(tree, "ndim=2", {"ndim=1=sharded_adamw"}, 2);
  const auto Lh = engine::make_layout(
      tree, ph, {Method::dmuon, plan::Reshard::z3, 1, engine::OptimizerPipeline::per_group}, 0);
  std::string tail;
  for (const auto& op : engine::make_schedule(Lh, so))
    if (op.op == Op::issue_reduce || op.op == Op::issue_stage2)
      tail += std::string(engine::op_name(op.op)) + "(" + std::to_string(op.group) + ") ";
  EXPECT_EQ(tail,
            "issue_reduce(2) issue_stage2(2) issue_reduce(0) issue_stage2(0) issue_reduce(3) "
            "issue_reduce(1) issue_stage2(3) issue_stage2(1) ");
}

// ddp-dmuon by hand: layers.0 {w [4,4], b [4]}, layers.1 {w [4,4]}, dedicated ndim=2, two
// ranks, round-robin owners: layers.0.w on rank 0, layers.1.w on rank 1; b is AdamW on every
// replica. Groups: 0 = {b} (non-dedicated), 1 = layers.0, 2 = layers.1; params 0 = layers.0.w,
// 1 = layers.0.b, 2 = layers.1.w.
TEST(StepSchedule, DdpDmuonHandWritten) {
  model::ModuleTree tree("M");
  const int list = tree.add_module(0, "layers", "ModuleList");
  const int l0 = tree.add_module(list, "0", "L");
  tree.add_parameter(l0, "w", {4, 4});
  tree.add_parameter(l0, "b", {4});
  tree.add_parameter(tree.add_module(list, "1", "L"), "w", {4, 4});
  tree.finalize();
  const auto p = two_rank_round_robin_plan(tree, "ndim=2");
  engine::StepSpec so;
  so.prefetch = 1;
  const engine::StepSpec lo{Method::ddp_dmuon, plan::Reshard::z3, 1,
                            engine::OptimizerPipeline::per_group};
  const auto L = engine::make_layout(tree, p, lo, 0);
  ASSERT_EQ(L.groups.size(), 3u);
  EXPECT_EQ(L.params[0].storage, engine::Storage::replicated);
  EXPECT_TRUE(L.params[0].updated_here);   // owner of layers.0.w
  EXPECT_TRUE(L.params[1].updated_here);   // AdamW bias: every replica
  EXPECT_FALSE(L.params[2].updated_here);  // layers.1.w: rank 1's
  const auto S = engine::make_schedule(L, so);
  EXPECT_EQ(ops_text(S),
            // forward: replicas, no weight collective; before a site's compute copy the
            // previous step's post-step broadcast of that site must have landed
            "pack(0) take_replica(1) pack(1) forward(0,1) take_replica(2) pack(2) forward(1,0) "
            "forward(2,2) "
            // backward: a reduce per site to its owner, the bias all-reduce
            "backward(2,2) issue_reduce(2) backward(1,0) issue_reduce(1) backward(0,1) "
            "issue_reduce(0) "
            // optimizer: AdamW on the bias; Muon on layers.0.w only; both sites broadcast
            "wait_reduce(0) apply(0,1) wait_reduce(1) prepare(1) newton_schulz(1,0) apply(1,0) "
            "publish(1) wait_reduce(2) publish(2) ");
  // The collectives, in issue order, all on the one group of both ranks.
  std::string calls;
  for (const auto& op : S)
    for (const auto& c : engine::collectives_of(L, op, so)) {
      EXPECT_EQ(op.comm, CommGroup::shard);
      calls += std::string(comm::collective_kind_name(c.kind)) + "(" + std::to_string(c.count) +
               "," + comm::dtype_name(c.dtype) + "," + std::to_string(c.root) + ") ";
    }
  EXPECT_EQ(calls,
            "reduce(16,f32,1) reduce(16,f32,0) all_reduce(4,f32,-1) broadcast(16,f32,0) "
            "broadcast(16,f32,1) ");
  // Formula, hand-derived for rank 0: it sends layers.1.w's gradient (64 B) and receives
  // layers.1.w's master (64 B); the bias all-reduce floor(4·1/2)·4 = 8 B.
  engine::VolumeOptions ddp;
  ddp.method = Method::ddp_dmuon;
  ddp.wire_bytes = 4;
  const auto v = engine::predict_step_volume(tree, p, ddp).of_rank(0);
  EXPECT_EQ(v[engine::channel_index(CommGroup::shard, comm::CollectiveKind::reduce)].bytes, 64);
  EXPECT_EQ(v[engine::channel_index(CommGroup::shard, comm::CollectiveKind::reduce)].calls, 2);
  EXPECT_EQ(v[engine::channel_index(CommGroup::shard, comm::CollectiveKind::broadcast)].bytes, 64);
  EXPECT_EQ(v[engine::channel_index(CommGroup::shard, comm::CollectiveKind::broadcast)].calls, 2);
  EXPECT_EQ(v[engine::channel_index(CommGroup::shard, comm::CollectiveKind::all_reduce)].bytes, 8);
  EXPECT_EQ(v[engine::channel_index(CommGroup::shard, comm::CollectiveKind::all_reduce)].calls, 1);
}

// --tp 2 by hand: one DP rank (G = 1), two sites layers.0 {a [4,4], b [4,4]}, layers.1 {c [4,4]},
// every matrix TP-sharded, c row-parallel. The TP owner pass (tp_owners.hpp) visits a, b, c with
// equal costs: a to TP rank 0 (loads tie, rotation offset 0), b to 1 (the less loaded), c to 0
// (tie again). The optimizer of the DP owner (every rank here) replaces each Newton–Schulz by
// tp_gather, newton_schulz on its TP owner only, tp_scatter; everything else is the ordinary
// step on the local 2 x 4 / 4 x 2 shards.
TEST(StepSchedule, TensorParallelHandWritten) {
  model::ModuleTree tree("M");
  const int list = tree.add_module(0, "layers", "ModuleList");
  const int l0 = tree.add_module(list, "0", "L");
  tree.add_parameter(l0, "a", {4, 4});
  tree.add_parameter(l0, "b", {4, 4});
  tree.add_parameter(tree.add_module(list, "1", "L"), "c", {4, 4});
  tree.finalize();
  plan::PlanConfig pc;
  pc.dedicate_rule = "all";
  pc.partition.shard = 1;
  pc.partition.strategy = partition::parse_strategy("round_robin");
  pc.tp = 2;
  pc.tp_shard_rule = "all";
  pc.tp_row_rule = "contains:layers.1";
  const auto p = plan::make_plan(tree, pc);
  ASSERT_EQ(p.tp.tp_owner, (std::vector<int>{0, 1, 0}));
  ASSERT_EQ(p.tp.shard_dim, (std::vector<int>{0, 0, 1}));
  const auto local = plan::tp_local_tree(tree, p);
  engine::StepSpec so;
  so.prefetch = 1;
  std::vector<engine::StepLayout> layouts;
  for (int t = 0; t < 2; ++t)
    layouts.push_back(engine::make_layout(local, p, {Method::dmuon, plan::Reshard::z3, 1}, t));
  const auto& L = layouts[0];
  ASSERT_EQ(L.params.size(), 3u);
  EXPECT_EQ(L.params[0].shape.rows, 2);  // a: rows split
  EXPECT_EQ(L.params[0].logical.rows, 4);
  EXPECT_EQ(L.params[2].shape.cols, 2);  // c: columns split
  EXPECT_EQ(L.params[2].logical.cols, 4);
  const std::string step =
      "pack(0) issue_weights(0) pack(1) issue_weights(1) wait_weights(0) forward(0,0) "
      "forward(0,1) release_weights(0) wait_weights(1) forward(1,2) release_weights(1) "
      "pack(1) issue_weights(1) pack(0) issue_weights(0) wait_weights(1) backward(1,2) "
      "release_weights(1) issue_reduce(1) wait_weights(0) backward(0,1) backward(0,0) "
      "release_weights(0) wait_reduce(1) issue_reduce(0) ";
  EXPECT_EQ(ops_text(engine::make_schedule(layouts[0], so)),
            step +
                "wait_reduce(0) prepare(0) tp_stage(0,0) tp_gather(0,0) tp_assemble(0,0) "
                "newton_schulz(0,0) "
                "tp_split(0,0) tp_scatter(0,0) "
                "tp_stage(0,1) tp_gather(0,1) tp_scatter(0,1) apply(0,0) apply(0,1) "
                "prepare(1) tp_stage(1,2) tp_gather(1,2) tp_assemble(1,2) "
                "newton_schulz(1,2) "
                "tp_split(1,2) tp_scatter(1,2) "
                "apply(1,2) ");
  EXPECT_EQ(ops_text(engine::make_schedule(layouts[1], so)),
            step +
                "wait_reduce(0) prepare(0) tp_stage(0,0) tp_gather(0,0) tp_scatter(0,0) "
                "tp_stage(0,1) tp_gather(0,1) tp_assemble(0,1) newton_schulz(0,1) "
                "tp_split(0,1) tp_scatter(0,1) apply(0,0) apply(0,1) "
                "prepare(1) tp_stage(1,2) tp_gather(1,2) tp_scatter(1,2) apply(1,2) ");
  // Each exchange moves the 8-element local shard, rooted at the parameter's TP owner, on the
  // TP group, exposed in the optimizer phase.
  for (const auto& op : engine::make_schedule(layouts[1], so))
    if (op.op == Op::tp_gather || op.op == Op::tp_scatter) {
      EXPECT_EQ(op.comm, CommGroup::tp);
      const auto calls = engine::collectives_of(layouts[1], op, so);
      ASSERT_EQ(calls.size(), 1u);
      const auto& call = calls[0];
      EXPECT_EQ(call.kind, op.op == Op::tp_gather ? comm::CollectiveKind::gather
                                                  : comm::CollectiveKind::scatter);
      EXPECT_EQ(call.count, 8);
      EXPECT_EQ(call.root, op.param == 1 ? 1 : 0);
      EXPECT_EQ(op.phase, engine::Phase::optimizer_other);
      EXPECT_TRUE(op.exposed);
    }
  // --accum 2: forward and backward twice on the local shards (the second backward
  // accumulating), the reduces after the second backward only, then the same optimizer: one
  // TP exchange per TP-sharded parameter per step, after the last micro-step's reduces, the
  // same TP ops (parameter, count, root) on both TP ranks.
  so.accum = 2;
  const std::string forward =
      "pack(0) issue_weights(0) pack(1) issue_weights(1) wait_weights(0) forward(0,0) "
      "forward(0,1) release_weights(0) wait_weights(1) forward(1,2) release_weights(1) "
      "pack(1) issue_weights(1) pack(0) issue_weights(0) wait_weights(1) backward(1,2) "
      "release_weights(1) ";
  const std::string micro0 =
      forward + "wait_weights(0) backward(0,1) backward(0,0) release_weights(0) ";
  const std::string micro1 = forward +
                             "issue_reduce(1) wait_weights(0) backward(0,1) backward(0,0) "
                             "release_weights(0) wait_reduce(1) issue_reduce(0) ";
  std::string tp_ops[2];
  for (int t = 0; t < 2; ++t) {
    const auto La = engine::make_layout(
        local, p, {Method::dmuon, plan::Reshard::z3, 1, engine::OptimizerPipeline::per_group, 2},
        t);
    const auto S = engine::make_schedule(La, so);
    EXPECT_EQ(
        ops_text(S),
        micro0 + micro1 +
            (t == 0 ? "wait_reduce(0) prepare(0) tp_stage(0,0) tp_gather(0,0) tp_assemble(0,0) "
                      "newton_schulz(0,0) "
                      "tp_split(0,0) tp_scatter(0,0) tp_stage(0,1) tp_gather(0,1) tp_scatter(0,1) "
                      "apply(0,0) apply(0,1) "
                      "prepare(1) tp_stage(1,2) tp_gather(1,2) tp_assemble(1,2) "
                      "newton_schulz(1,2) "
                      "tp_split(1,2) tp_scatter(1,2) apply(1,2) "
                    : "wait_reduce(0) prepare(0) tp_stage(0,0) tp_gather(0,0) tp_scatter(0,0) "
                      "tp_stage(0,1) tp_gather(0,1) tp_assemble(0,1) newton_schulz(0,1) "
                      "tp_split(0,1) tp_scatter(0,1) apply(0,0) "
                      "apply(0,1) prepare(1) tp_stage(1,2) tp_gather(1,2) "
                      "tp_scatter(1,2) "
                      "apply(1,2) "))
        << "TP rank " << t;
    int accumulating = 0;
    for (const auto& op : S) {
      accumulating += op.op == Op::backward && op.accumulate;
      if (op.op != Op::tp_gather && op.op != Op::tp_scatter) continue;
      const auto call = engine::collectives_of(La, op, so).at(0);
      EXPECT_EQ(call.count, 8);
      tp_ops[t] += std::string(engine::op_name(op.op)) + "(" + std::to_string(op.param) + "," +
                   std::to_string(call.root) + ") ";
    }
    EXPECT_EQ(accumulating, 3);  // the second micro-step's backward of a, b, c
  }
  EXPECT_EQ(tp_ops[0],
            "tp_gather(0,0) tp_scatter(0,0) tp_gather(1,1) tp_scatter(1,1) tp_gather(2,0) "
            "tp_scatter(2,0) ");
  EXPECT_EQ(tp_ops[1], tp_ops[0]);
  // --comm-dtype bf16: the gather carries the gradients' wire dtype, the scatter the fp32
  // update.
  so.wire = kernels::Dtype::bf16;
  so.accum = 1;
  const auto L16 = engine::make_layout(local, p, so, 0);
  int bf16_gathers = 0;
  for (const auto& op : engine::make_schedule(L16, so)) {
    if (op.op != Op::tp_gather && op.op != Op::tp_scatter) continue;
    const auto call = engine::collectives_of(L16, op, so).at(0);
    EXPECT_EQ(call.dtype, op.op == Op::tp_gather ? comm::DType::bf16 : comm::DType::f32);
    bf16_gathers += op.op == Op::tp_gather;
  }
  EXPECT_EQ(bf16_gathers, 3);
  // A TP layout needs the local shapes.
  EXPECT_THROW(engine::make_layout(tree, p, {Method::dmuon, plan::Reshard::z3, 1}, 0), InputError);
}

// --tp on the llm preset (every q, k, v, o, gate, up, down TP-sharded), for every rank of
// R x G x T worlds: within each TP group (world ranks dp·T .. dp·T + T − 1) the TP ops are the
// same sequence (op, parameter, count, root) on every rank, the Newton–Schulz of a TP-sharded
// parameter runs on its TP owner only, and each rank's gathers and scatters add up to the TP
// formula (engine/step/step_volume.hpp: calls, bytes sent and received).
TEST(StepSchedule, TensorParallelGroupsAgreeAndMatchTheFormula) {
  for (auto [world, replicate, tp] : {std::tuple{2, 1, 2}, {4, 1, 2}, {8, 2, 2}, {8, 1, 4}}) {
    SCOPED_TRACE("world " + std::to_string(world) + " R " + std::to_string(replicate) + " T " +
                 std::to_string(tp));
    const auto setup = test::llm_tp_plan(world, replicate, tp);
    const auto& topo = setup.topo;
    const auto& p = setup.plan;
    const auto& local = setup.local;
    ASSERT_EQ(p.tp.sharded.size(), 28u);
    engine::VolumeOptions vo;
    vo.wire_bytes = 4;
    const auto v = engine::predict_step_volume(topo.tree, p, vo).tp_exchange;
    engine::StepSpec so;
    std::vector<std::string> tp_ops(static_cast<std::size_t>(world));
    for (int w = 0; w < world; ++w) {
      const int t = w % tp;
      const auto L = engine::make_layout(local, p, {Method::dmuon, plan::Reshard::z3, 1}, w);
      comm::KindCounters gather, scatter;
      int open = -1;  // the parameter between its gather and scatter
      for (const auto& op : engine::make_schedule(L, so)) {
        const auto& prm =
            op.param >= 0 ? L.params[static_cast<std::size_t>(op.param)] : L.params.front();
        if (op.op == Op::newton_schulz && prm.tp_sharded()) {
          EXPECT_EQ(open, op.param);
          EXPECT_EQ(prm.tp_owner, t) << prm.name;
        }
        if (op.op != Op::tp_gather && op.op != Op::tp_scatter) continue;
        EXPECT_EQ(open, op.op == Op::tp_gather ? -1 : op.param);
        open = op.op == Op::tp_gather ? op.param : -1;
        const auto call = engine::collectives_of(L, op, so).at(0);
        tp_ops[static_cast<std::size_t>(w)] += std::string(engine::op_name(op.op)) + "(" +
                                               prm.name + "," + std::to_string(call.count) + "," +
                                               std::to_string(call.root) + ") ";
        auto& k = op.op == Op::tp_gather ? gather : scatter;
        const auto bytes = static_cast<std::uint64_t>(call.count) * 4;
        const bool root = call.root == t;
        const bool in = op.op == Op::tp_gather;  // the root receives in a gather
        ++k.calls;
        if (root == in)
          k.bytes_received += root ? bytes * (tp - 1) : bytes;
        else
          k.bytes_sent += root ? bytes * (tp - 1) : bytes;
      }
      EXPECT_EQ(open, -1);
      EXPECT_EQ(plan::tp_volume_mismatch(v, w, gather, scatter), "") << "rank " << w;
    }
    int exchanged = 0;
    for (int w = 0; w < world; ++w) {
      EXPECT_EQ(tp_ops[static_cast<std::size_t>(w)], tp_ops[static_cast<std::size_t>(w - w % tp)])
          << "rank " << w << " differs from its TP group's first rank";
      exchanged += !tp_ops[static_cast<std::size_t>(w)].empty();
    }
    EXPECT_GT(exchanged, 0);
  }
}

}  // namespace

// FSDP2's rule (StepSpec::fsdp2) by hand: fsdp-adamw over three one-parameter layers, Z3, no
// prefetch. Without it the grad ring (prefetch + 2 = 2 slots) waits for layers.2's reduce
// only when layers.0 is about to reuse its slot; with it each group waits for the previous
// group's reduce after its own backward, just before issuing its reduce, so one reduce at a
// time is in flight; the optimizer then waits only for the last one.
TEST(StepSchedule, Fsdp2KeepsOneReduceInFlight) {
  const auto tree = square_layers(3);
  const auto p = two_rank_round_robin_plan(tree, "all");
  engine::StepSpec so;
  so.method = Method::fsdp_adamw;
  so.prefetch = 0;
  const std::string forward =
      "pack(0) issue_weights(0) wait_weights(0) forward(0,0) release_weights(0) "
      "pack(1) issue_weights(1) wait_weights(1) forward(1,1) release_weights(1) "
      "pack(2) issue_weights(2) wait_weights(2) forward(2,2) release_weights(2) "
      "pack(2) issue_weights(2) wait_weights(2) backward(2,2) release_weights(2) "
      "issue_reduce(2) pack(1) issue_weights(1) wait_weights(1) backward(1,1) "
      "release_weights(1) ";
  const std::string ring =
      "issue_reduce(1) pack(0) issue_weights(0) wait_weights(0) wait_reduce(2) backward(0,0) "
      "release_weights(0) issue_reduce(0) "
      "wait_reduce(0) apply(0,0) wait_reduce(1) apply(1,1) apply(2,2) ";
  const std::string fsdp2 =
      "wait_reduce(2) issue_reduce(1) pack(0) issue_weights(0) wait_weights(0) backward(0,0) "
      "release_weights(0) wait_reduce(1) issue_reduce(0) "
      "wait_reduce(0) apply(0,0) apply(1,1) apply(2,2) ";
  for (bool on : {false, true}) {
    so.fsdp2 = on;
    const auto L = engine::make_layout(tree, p, so, 0);
    ASSERT_EQ(L.groups.size(), 3u);
    EXPECT_EQ(L.fsdp2, on);
    EXPECT_EQ(ops_text(engine::make_schedule(L, so)), forward + (on ? fsdp2 : ring)) << on;
  }
  // With --accum every group keeps its gradients to the last micro-step: the rule is off.
  so.accum = 2;
  EXPECT_FALSE(engine::make_layout(tree, p, so, 0).fsdp2);
}

// FSDP2's root unit (StepLayout::stays_gathered; torch/distributed/fsdp/_fully_shard/
// _fsdp_state.py, FSDPState._lazy_init: the root's post_forward_mesh_info = None) by hand:
// M.layers.0.w, M.layers.1.w (4×4, dedicated: the block units 1 and 2) and the root's norm M.n
// (4 elements: the root unit, group 0), fsdp-adamw on 2 ranks, prefetch 0. Params in model
// order (the root's own first): n 0, w0 1, w1 2: group g holds param g. Z3 with fsdp2: group 0 is
// gathered once, never released between its forward and its backward, and released after its
// backward; groups 1 and 2 as before. Off without fsdp2 (the engine's own executors) and in Z2
// (every group stays anyway).
TEST(StepSchedule, Fsdp2KeepsTheRootUnitGatheredFromForwardToBackward) {
  model::ModuleTree tree("M");
  const int list = tree.add_module(0, "layers", "ModuleList");
  for (int i = 0; i < 2; ++i)
    tree.add_parameter(tree.add_module(list, std::to_string(i), "L"), "w", {4, 4});
  tree.add_parameter(0, "n", {4});
  tree.finalize();
  const auto p = two_rank_round_robin_plan(tree, "ndim=2");
  engine::StepSpec so;
  so.method = Method::fsdp_adamw;
  so.prefetch = 0;
  const std::string blocks_forward =
      "pack(1) issue_weights(1) wait_weights(1) forward(1,1) release_weights(1) "
      "pack(2) issue_weights(2) wait_weights(2) forward(2,2) release_weights(2) "
      "pack(2) issue_weights(2) wait_weights(2) backward(2,2) release_weights(2) "
      "issue_reduce(2) pack(1) issue_weights(1) wait_weights(1) backward(1,1) "
      "release_weights(1) ";
  // Without fsdp2: the engine's ring (2 slots: group 0 waits for group 2's reduce).
  const std::string off =
      "pack(0) issue_weights(0) wait_weights(0) forward(0,0) "
      "release_weights(0) " +
      blocks_forward +
      "issue_reduce(1) pack(0) issue_weights(0) wait_weights(0) "
      "wait_reduce(2) backward(0,0) release_weights(0) issue_reduce(0) "
      "wait_reduce(0) apply(0,0) wait_reduce(1) apply(1,1) apply(2,2) ";
  // fsdp2: no release after group 0's forward, no re-gather before its backward.
  const std::string on = "pack(0) issue_weights(0) wait_weights(0) forward(0,0) " + blocks_forward +
                         "wait_reduce(2) issue_reduce(1) backward(0,0) release_weights(0) "
                         "wait_reduce(1) issue_reduce(0) "
                         "wait_reduce(0) apply(0,0) apply(1,1) apply(2,2) ";
  for (bool fsdp2 : {false, true}) {
    so.fsdp2 = fsdp2;
    const auto L = engine::make_layout(tree, p, so, 0);
    ASSERT_EQ(L.groups.size(), 3u);
    EXPECT_TRUE(L.groups[0].root_unit);
    EXPECT_FALSE(L.groups[1].root_unit || L.groups[2].root_unit);
    EXPECT_EQ(L.stays_gathered(L.groups[0]), fsdp2);
    EXPECT_EQ(ops_text(engine::make_schedule(L, so)), fsdp2 ? on : off) << fsdp2;
    // Layout (elements): chunks w 8, n 2; padded w 16, n 4. One ring slot of 16 (prefetch 0);
    // fsdp2: the root's own slot after it, 16 + 4 = 20, live from its forward on: 4 + 16.
    EXPECT_EQ(L.weight_slot_elems, 16);
    EXPECT_EQ(L.weight_pool_elems, fsdp2 ? 20 : 16);
    EXPECT_EQ(L.weight_base(0, 0), fsdp2 ? 16 : 0);
    EXPECT_EQ(L.weight_base(1, 1), 0);
    EXPECT_EQ(L.live_weight_elems, fsdp2 ? 20 : 16);

    // The formula by hand (fp32, G = 2: an all_gather receives 4·(G−1)·c bytes): w0 and w1
    // 32 B each, n 8 B. Z3 gathers the blocks twice: 4 calls, 128 B; the root unit twice
    // without fsdp2 (6 calls, 144 B), once with it (5 calls, 136 B); the reduce_scatters once
    // (3 calls, 72 B). --accum 2 repeats every gather pass: 10 calls, 272 B with fsdp2.
    for (int accum : {1, 2}) {
      engine::StepSpec a = so;
      a.accum = accum;
      const auto v = engine::predict_step_volume(tree, p, engine::volume_options(a)).of_rank(0);
      const auto& gather =
          v[engine::channel_index(CommGroup::shard, comm::CollectiveKind::all_gather)];
      const auto& scatter =
          v[engine::channel_index(CommGroup::shard, comm::CollectiveKind::reduce_scatter)];
      EXPECT_EQ(gather.calls, accum * (fsdp2 ? 5 : 6)) << fsdp2 << accum;
      EXPECT_EQ(gather.bytes, accum * (fsdp2 ? 136 : 144)) << fsdp2 << accum;
      EXPECT_EQ(scatter.calls, 3);
      EXPECT_EQ(scatter.bytes, 72);
    }
  }
  // Z2: every group stays gathered already; the rule is off and the step unchanged by fsdp2
  // (its reduce rule aside).
  so.reshard = plan::Reshard::z2;
  so.fsdp2 = true;
  const auto z2 = engine::make_layout(tree, p, so, 0);
  EXPECT_FALSE(z2.fsdp2_root);
  EXPECT_EQ(ops_text(engine::make_schedule(z2, so)),
            "pack(0) issue_weights(0) wait_weights(0) forward(0,0) "
            "pack(1) issue_weights(1) wait_weights(1) forward(1,1) "
            "pack(2) issue_weights(2) wait_weights(2) forward(2,2) "
            "backward(2,2) release_weights(2) issue_reduce(2) backward(1,1) release_weights(1) "
            "wait_reduce(2) issue_reduce(1) backward(0,0) release_weights(0) wait_reduce(1) "
            "issue_reduce(0) wait_reduce(0) apply(0,0) apply(1,1) apply(2,2) ");
  const auto v = engine::predict_step_volume(tree, p, engine::volume_options(so)).of_rank(0);
  EXPECT_EQ(v[engine::channel_index(CommGroup::shard, comm::CollectiveKind::all_gather)].bytes, 72);
}

namespace {

// M.layers.0 … layers.(n−1), each a 4×4 weight `w` and a 4-element norm `n`.
model::ModuleTree layers_with_norms(int n) {
  model::ModuleTree tree("M");
  const int list = tree.add_module(0, "layers", "ModuleList");
  for (int i = 0; i < n; ++i) {
    const int l = tree.add_module(list, std::to_string(i), "L");
    tree.add_parameter(l, "w", {4, 4});
    tree.add_parameter(l, "n", {4});
  }
  tree.finalize();
  return tree;
}

}  // namespace

// The reference's DMuon step written out by hand (docs/REFERENCE-STEP.md in the shared docs)
// on three layers whose matrices are dedicated (round robin: rank 0 owns layers.0.w and
// layers.2.w) and whose norms form the FSDP unit (group 0; sites are groups 1-3), Z2. Params
// in model order: w0 0, n0 1, w1 2, n1 3, w2 4, n2 5.
TEST(StepSchedule, ReferenceScheduleHandWritten) {
  const auto tree = layers_with_norms(3);
  const auto p = two_rank_round_robin_plan(tree, "ndim=2");
  engine::StepSpec so;
  so.reshard = plan::Reshard::z2;
  const auto L = engine::make_layout(tree, p, so, 0);
  ASSERT_EQ(L.groups.size(), 4u);
  EXPECT_EQ(L.params[0].storage, engine::Storage::owned);
  EXPECT_EQ(L.params[2].storage, engine::Storage::remote);
  EXPECT_EQ(L.params[4].storage, engine::Storage::owned);
  EXPECT_EQ(L.grad_window, 2);  // one site reducing while the next one's gradients are written
  const std::string forward =
      "pack(0) issue_weights(0) pack(1) issue_weights(1) wait_weights(0) forward(0,1) "
      "forward(0,3) forward(0,5) pack(2) issue_weights(2) wait_weights(1) forward(1,0) "
      "pack(3) issue_weights(3) wait_weights(2) forward(2,2) wait_weights(3) forward(3,4) ";
  EXPECT_EQ(ops_text(engine::make_schedule(L, so)),
            forward +
                // backward: each site's hook waits for the previous site's reduce first
                "backward(3,4) release_weights(3) issue_reduce(3) "
                "backward(2,2) release_weights(2) wait_reduce(3) issue_reduce(2) "
                "backward(1,0) release_weights(1) wait_reduce(2) issue_reduce(1) "
                "backward(0,5) backward(0,3) backward(0,1) release_weights(0) issue_reduce(0) "
                // optimizer: the whole site reduce tail, the sites in forward order, AdamW last
                "wait_reduce(1) prepare(1) newton_schulz(1,0) apply(1,0) "
                "prepare(3) newton_schulz(3,4) apply(3,4) "
                "wait_reduce(0) apply(0,1) apply(0,3) apply(0,5) ");
  // The overlapped schedule: three slots, no waits in backward, groups in forward order.
  so.dmuon_schedule = engine::DmuonSchedule::overlapped;
  const auto O = engine::make_layout(tree, p, so, 0);
  EXPECT_EQ(O.grad_window, 3);
  EXPECT_EQ(ops_text(engine::make_schedule(O, so)),
            forward +
                "backward(3,4) release_weights(3) issue_reduce(3) "
                "backward(2,2) release_weights(2) issue_reduce(2) "
                "backward(1,0) release_weights(1) issue_reduce(1) "
                "backward(0,5) backward(0,3) backward(0,1) release_weights(0) issue_reduce(0) "
                "wait_reduce(0) apply(0,1) apply(0,3) apply(0,5) "
                "wait_reduce(1) prepare(1) newton_schulz(1,0) apply(1,0) wait_reduce(2) "
                "wait_reduce(3) prepare(3) newton_schulz(3,4) apply(3,4) ");
  // The run models the engine's loop and the replay follow.
  so.dmuon_schedule = engine::DmuonSchedule::reference;
  const auto ref = engine::step_run_model(so);
  EXPECT_FALSE(ref.barrier);
  EXPECT_TRUE(ref.comm_issue_order);
  EXPECT_TRUE(ref.serial_rooted_calls);
  so.method = Method::fsdp_adamw;  // the schedule is dmuon's: the baselines keep theirs
  EXPECT_TRUE(engine::step_run_model(so).barrier);
  EXPECT_FALSE(engine::step_run_model(so).comm_issue_order);
}

// Over the sweep, every reference dmuon schedule keeps at most one site's reduce in flight
// (a site's reduce is issued only once every earlier site's was waited), waits for every
// site's reduce before its first Newton–Schulz, and runs every site's optimizer ops before
// the other groups' (AdamW last).
TEST(StepSchedule, ReferenceDmuonKeepsOneSiteReduceInFlight) {
  int checked = 0;
  for (const auto& c : all_cases()) {
    if (c.method != Method::dmuon || c.dmuon_schedule != engine::DmuonSchedule::reference ||
        c.accum > 1 || c.pipeline != engine::OptimizerPipeline::per_group)
      continue;
    const Built b = build(c);
    for (std::size_t r = 0; r < b.schedules.size(); ++r) {
      const auto& L = b.layouts[r];
      const auto site = [&](int g) {
        return g >= 0 &&
               L.groups[static_cast<std::size_t>(g)].kind == engine::GroupKind::dmuon_site;
      };
      std::set<int> in_flight;
      bool optimizer = false, other_applied = false;
      for (const auto& op : b.schedules[r]) {
        if (op.op == Op::issue_reduce && site(op.group)) {
          EXPECT_TRUE(in_flight.empty()) << c.name() << " rank " << r << " group " << op.group;
          in_flight.insert(op.group);
        }
        if (op.op == Op::wait_reduce) in_flight.erase(op.group);
        if (op.op == Op::newton_schulz || op.op == Op::prepare || op.op == Op::apply) {
          if (!optimizer) {
            EXPECT_TRUE(in_flight.empty()) << c.name() << " rank " << r;
          }
          optimizer = true;
          if (!site(op.group)) other_applied = true;
          EXPECT_FALSE(site(op.group) && other_applied) << c.name() << " rank " << r;
        }
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 100);
}

// --ep 2 on two ranks: layers.{0,1}, each a dense w and a container of four routed experts;
// rank 1 holds experts 2 and 3 of each container as its local 0 and 1. The experts are outside
// the owners and the sites: a group of their own after each layer's site, updated with Muon
// where they are, computed on a copy of their masters, no collective, no hook.
TEST(StepSchedule, ExpertParallelHandWritten) {
  model::ModuleTree full("M");
  const int list = full.add_module(0, "layers", "ModuleList");
  for (const char* l : {"0", "1"}) {
    const int layer = full.add_module(list, l, "L");
    full.add_parameter(layer, "w", {4, 4});
    const int experts = full.add_module(layer, "experts", "ModuleList");
    for (const char* e : {"0", "1", "2", "3"})
      full.add_parameter(full.add_module(experts, e, "E"), "w", {4, 4});
  }
  full.finalize();
  const model::ModuleTree tree = model::expert_local_tree(full, 2);
  ASSERT_EQ(tree.num_parameters(), 6u);  // per layer: w, experts.0.w, experts.1.w
  plan::PlanConfig pc;
  pc.dedicate_rule = "ndim=2";
  pc.partition.shard = 2;
  pc.partition.strategy = partition::parse_strategy("round_robin");
  pc.partition.pack = false;
  pc.ep = 2;
  const auto p = plan::make_plan(tree, pc);
  // Only the dense matrices have owners and sites: layers.0.w rank 0, layers.1.w rank 1.
  EXPECT_EQ(p.partition.owner_rank(0), 0);
  EXPECT_EQ(p.partition.owner_rank(3), 1);
  EXPECT_EQ(p.hooks.sites.size(), 2u);
  for (int pid : {1, 2, 4, 5}) {
    EXPECT_TRUE(p.is_expert(pid));
    EXPECT_LT(p.hooks.site_of_param[static_cast<std::size_t>(pid)], 0);
  }
  engine::StepSpec so;
  so.prefetch = 1;
  so.dmuon_schedule = engine::DmuonSchedule::overlapped;
  const auto L = engine::make_layout(tree, p, so, 1);
  ASSERT_EQ(L.groups.size(), 4u);  // site 0, experts 0, site 1, experts 1
  EXPECT_EQ(L.groups[1].kind, engine::GroupKind::expert);
  EXPECT_EQ(L.groups[3].kind, engine::GroupKind::expert);
  EXPECT_EQ(L.groups[1].members, (std::vector<int>{1, 2}));
  for (int i : {1, 2, 4, 5}) {
    const auto& e = L.params[static_cast<std::size_t>(i)];
    EXPECT_EQ(e.storage, engine::Storage::expert);
    EXPECT_TRUE(e.updated_here && e.muon);
    EXPECT_GE(e.master_offset, 0);
    // Every sample routed to it arrives: rank 0 of 1 of its data.
    EXPECT_EQ(e.data_rank, 0);
    EXPECT_EQ(e.data_ranks, 1);
  }
  // Rank 1's local expert 1 of layers.1 is the model's expert 3.
  EXPECT_EQ(L.params[5].data_key, engine::expert_data_key("layers.1.experts.3.w"));
  EXPECT_EQ(L.params[3].data_key, 3u);  // a dense parameter keeps its id
  EXPECT_EQ(L.params[3].data_rank, 1);
  EXPECT_EQ(L.params[3].data_ranks, 2);
  EXPECT_EQ(ops_text(engine::make_schedule(L, so)),
            // forward: the sites' broadcasts; the experts' compute copy, no collective (an
            // expert group takes its place in the prefetch window: site 1's broadcast is issued
            // before experts 0 compute)
            "pack(0) issue_weights(0) pack(1) wait_weights(0) forward(0,0) release_weights(0) "
            "pack(2) issue_weights(2) forward(1,1) forward(1,2) pack(3) wait_weights(2) "
            "forward(2,3) release_weights(2) forward(3,4) forward(3,5) "
            // backward: the experts' gradients stay where they are computed
            "backward(3,5) backward(3,4) pack(2) issue_weights(2) wait_weights(2) backward(2,3) "
            "release_weights(2) issue_reduce(2) backward(1,2) backward(1,1) pack(0) "
            "issue_weights(0) wait_weights(0) backward(0,0) release_weights(0) issue_reduce(0) "
            // optimizer: Muon on each of rank 1's experts (no reduce to wait) and on its own
            // site parameter
            "wait_reduce(0) prepare(1) newton_schulz(1,1) newton_schulz(1,2) apply(1,1) "
            "apply(1,2) wait_reduce(2) prepare(2) newton_schulz(2,3) apply(2,3) "
            "prepare(3) newton_schulz(3,4) newton_schulz(3,5) apply(3,4) apply(3,5) ");
}
