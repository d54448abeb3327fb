// --method ddp-dmuon under MPI (docs/METRICS.md): every rank a full replica, each dedicated
// gradient reduced to its owner, Newton–Schulz on the owner only, the owners' fp32 masters
// broadcast after the step. Checked against hand-derived call and byte counts for a small
// hand-built model, against the one-process reference (--check, which also requires every
// replica to equal rank 0's) on the tiny topologies, and against ddp-muon's weights.

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "dmuon/engine/engine.hpp"
#include "dmuon/engine/verify/reference.hpp"
#include "dmuon/engine/verify/replica_agreement.hpp"
#include "kokkos_environment.hpp"
#include "mpi_test_util.hpp"
#include "test_plan_options.hpp"

namespace {

using namespace dmuon;
using comm::CollectiveKind;
using engine::CommGroup;
using engine::Method;

engine::EngineOptions small_options(Method m) {
  engine::EngineOptions o;
  o.step.method = m;
  o.step.global_tokens = 8;  // the same global batch at every rank count
  o.run.steps = 2;
  o.run.warmup = 1;
  o.run.seed = 11;
  o.run.keep_final_weights = true;
  return o;
}

const engine::KindResult& channel(const engine::RunResult& r, CollectiveKind k) {
  return r.kinds[engine::channel_index(CommGroup::shard, k)];
}

// layers.0 {w [4,4], b [4]}, layers.1 {w [4,4]}; dedicated: ndim=2, so b is AdamW everywhere.
// Round-robin owners without packing: layers.0.w -> rank 0, layers.1.w -> rank 1 mod N.
struct Small {
  model::ModuleTree tree{"M"};
  plan::Plan plan;
  explicit Small(int world, int replicate = 1) {
    const int list = tree.add_module(0, "layers", "ModuleList");
    const int l0 = tree.add_module(list, "0", "L");
    tree.add_parameter(l0, "w", {4, 4});
    tree.add_parameter(l0, "b", {4});
    tree.add_parameter(tree.add_module(list, "1", "L"), "w", {4, 4});
    tree.finalize();
    plan::PlanConfig pc;
    pc.dedicate_rule = "ndim=2";
    pc.partition.shard = world / replicate;
    pc.partition.replicate = replicate;
    pc.partition.strategy = partition::parse_strategy("round_robin");
    pc.partition.pack = false;
    plan = plan::make_plan(tree, pc);
  }
};

TEST(DdpDmuonMpi, HandDerivedCallsAndBytes) {
  const int n = test::world_size();
  for (auto reduce : {plan::GradReduce::per_param, plan::GradReduce::packed}) {
    Small s(n);
    auto o = small_options(Method::ddp_dmuon);
    o.step.grad_reduce = reduce;
    o.run.check = true;
    const auto r = engine::run_engine(s.tree, s.plan, o, MPI_COMM_WORLD);
    EXPECT_TRUE(r.audit_ok) << r.audit_message;
    EXPECT_TRUE(r.check_passed) << r.max_rel_error << " at " << r.worst_param;
    // Two dedicated 16-element matrices, one per site and owner: 2 reduces (per parameter and
    // packed alike), 2 post-step broadcasts, 1 all-reduce (the bias), every rank.
    EXPECT_EQ(channel(r, CollectiveKind::reduce).calls_per_step, 2);
    EXPECT_EQ(channel(r, CollectiveKind::broadcast).calls_per_step, 2);
    EXPECT_EQ(channel(r, CollectiveKind::all_reduce).calls_per_step, 1);
    EXPECT_EQ(channel(r, CollectiveKind::all_gather).calls_per_step, 0);
    EXPECT_EQ(channel(r, CollectiveKind::reduce_scatter).calls_per_step, 0);
    // Max over ranks: a rank owning neither matrix (N >= 3) sends both gradients (2·64 B) and
    // receives both fp32 masters; with N = 2 each rank sends / receives the other's one.
    const std::int64_t max_bytes = n == 1 ? 0 : n == 2 ? 64 : 128;
    EXPECT_EQ(channel(r, CollectiveKind::reduce).bytes_measured, max_bytes);
    EXPECT_EQ(channel(r, CollectiveKind::broadcast).bytes_measured, max_bytes);
    // The bias all-reduce: floor(4·(N−1)/N) elements of 4 bytes.
    const std::int64_t bias[] = {0, 0, 8, 0, 12, 0, 0, 0, 12};
    EXPECT_EQ(channel(r, CollectiveKind::all_reduce).bytes_measured, bias[n]);
    if (test::world_rank() == 0) {
      // Per rank: rank 0 owns layers.0.w, rank 1 layers.1.w (rank 0 owns both when N = 1).
      const std::size_t red = engine::channel_index(CommGroup::shard, CollectiveKind::reduce);
      const std::size_t bc = engine::channel_index(CommGroup::shard, CollectiveKind::broadcast);
      for (int q = 0; q < n; ++q) {
        const std::int64_t want = n == 1 ? 0 : (q <= 1 ? 64 : 128);
        const auto at = [&](std::size_t c) { return c * static_cast<std::size_t>(n) + q; };
        EXPECT_EQ(r.rank_bytes[at(red)], want) << "rank " << q;
        EXPECT_EQ(r.rank_bytes[at(bc)], want) << "rank " << q;
      }
    }
  }
}

TEST(DdpDmuonMpi, CheckPassesAndAuditHoldsOnEveryTopology) {
  for (const char* t : test::axis({"moe", "sequential", "vla", "nested", "llm", "moe-llm"})) {
    test::PlanOptions po;
    po.topology = t;
    const auto topo = test::load_topology(po);
    const auto p = plan::make_plan(topo.tree, test::make_plan_config(po, topo, test::world_size()));
    for (auto reduce : {plan::GradReduce::per_param, plan::GradReduce::packed}) {
      auto o = small_options(Method::ddp_dmuon);
      o.step.grad_reduce = reduce;
      o.run.check = true;
      const auto r = engine::run_engine(topo.tree, p, o, MPI_COMM_WORLD);
      EXPECT_TRUE(r.audit_ok) << t << ": " << r.audit_message;
      EXPECT_TRUE(r.check_passed) << t << ": max rel error " << r.max_rel_error << " at "
                                  << r.worst_param;
    }
  }
}

TEST(DdpDmuonMpi, Bf16WireAndHsdpPlanPassCheck) {
  const int n = test::world_size();
  test::PlanOptions po;
  po.topology = "llm";
  po.replicate = n % 2 == 0 ? 2 : 1;  // the owners of an R x G plan: ranks of the whole world
  const auto topo = test::load_topology(po);
  const auto p = plan::make_plan(topo.tree, test::make_plan_config(po, topo, n));
  auto o = small_options(Method::ddp_dmuon);
  o.run.check = true;
  const auto f32 = engine::run_engine(topo.tree, p, o, MPI_COMM_WORLD);
  EXPECT_TRUE(f32.audit_ok) << f32.audit_message;
  EXPECT_TRUE(f32.check_passed) << f32.max_rel_error << " at " << f32.worst_param;
  o.step.wire = kernels::Dtype::bf16;
  o.step.global_tokens = 64;  // full-rank gradients: a meaningful 16-bit check
  const auto bf16 = engine::run_engine(topo.tree, p, o, MPI_COMM_WORLD);
  EXPECT_TRUE(bf16.audit_ok) << bf16.audit_message;
  EXPECT_TRUE(bf16.check_passed) << bf16.max_rel_error << " at " << bf16.worst_param << " "
                                 << bf16.check_note;
  // bf16 halves the reduce; the post-step broadcast carries the fp32 master either way.
  EXPECT_EQ(2 * channel(bf16, CollectiveKind::reduce).bytes_measured,
            channel(f32, CollectiveKind::reduce).bytes_measured);
  EXPECT_EQ(channel(bf16, CollectiveKind::broadcast).bytes_measured,
            channel(f32, CollectiveKind::broadcast).bytes_measured);
}

TEST(DdpDmuonMpi, SameWeightsAsDdpMuon) {
  test::PlanOptions po;
  po.topology = "moe";
  const auto topo = test::load_topology(po);
  const auto p = plan::make_plan(topo.tree, test::make_plan_config(po, topo, test::world_size()));
  const auto a = engine::run_engine(topo.tree, p, small_options(Method::ddp_dmuon), MPI_COMM_WORLD);
  const auto b = engine::run_engine(topo.tree, p, small_options(Method::ddp_muon), MPI_COMM_WORLD);
  if (test::world_rank() == 0) {
    std::string worst;
    EXPECT_LT(engine::max_relative_error(topo.tree, a.final_weights, b.final_weights, &worst), 1e-4)
        << worst;
  }
}

// The replica comparison --check adds for ddp-dmuon, on replicas made to differ by hand: rank r
// holds b = [3, 4 + 0.5·r] (‖b_0‖ = 5), so its divergence from rank 0 is 0.5·r / 5 = 0.1·r, the
// largest on the last rank; w is equal everywhere.
class FakeReplicas final : public engine::StepBackend {
 public:
  explicit FakeReplicas(int rank)
      : masters_{1, 2, 3, 4, 3, 4.0f + 0.5f * static_cast<float>(rank)} {}
  void read_masters(std::int64_t offset, std::int64_t count, float* host) override {
    std::copy(masters_.begin() + offset, masters_.begin() + offset + count, host);
  }
  comm::Communicator* comm(CommGroup) override { return nullptr; }
  void* buffer(const engine::BufferRef&) override { return nullptr; }
  void before_issue(const engine::StepOp&) override {}
  void wait(comm::Batch&) override {}
  void order_after(comm::Batch&, CommGroup) override {}
  void begin_step(long) override {}
  void pack(const engine::StepOp&) override {}
  void weights_arrived(const engine::StepOp&) override {}
  void forward(const engine::StepOp&, long) override {}
  void backward(const engine::StepOp&, long) override {}
  void poison_gradient(const engine::StepOp&) override {}
  void release_weights(const engine::StepOp&) override {}
  void prepare(const engine::StepOp&, long) override {}
  void newton_schulz(const engine::StepOp&) override {}
  void apply(const engine::StepOp&, long) override {}
  void end_step(long) override {}
  engine::PhaseTimer& timer() override { throw std::logic_error("no timer"); }
  std::int64_t allocated_bytes() const override { return 0; }

 private:
  std::vector<float> masters_;
};

TEST(DdpDmuonMpi, ReplicaDivergenceFindsTheReplicaThatDiffers) {
  engine::StepLayout L;
  for (auto [name, numel, offset] :
       {std::tuple<const char*, std::int64_t, std::int64_t>{"w", 4, 0}, {"b", 2, 4}}) {
    engine::ParamLayout p;
    p.name = name;
    p.numel = numel;
    p.master_offset = offset;
    p.storage = engine::Storage::replicated;
    L.params.push_back(p);
  }
  const int n = test::world_size();
  FakeReplicas backend(test::world_rank());
  const auto d = engine::replica_divergence(L, backend, MPI_COMM_WORLD);
  EXPECT_NEAR(d.max_rel_error, 0.1 * (n - 1), 1e-6);
  EXPECT_EQ(d.rank, n == 1 ? 0 : n - 1);
  EXPECT_EQ(d.param, n == 1 ? "" : "b");
}

}  // namespace
