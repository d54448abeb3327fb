// Engine under MPI: resharding modes and prefetch depths agree bit for bit, every method on
// every built-in tiny topology matches the one-process recomputation, the measured bytes equal
// SPEC §6's prediction exactly (1-D and HSDP), DMuon computes the same weights as DDP + Muon,
// HSDP the same as 1-D, and packed gradient reduces the same as per-parameter ones.

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "dmuon/base/error.hpp"
#include "dmuon/base/trace.hpp"
#include "dmuon/comm/dtype.hpp"
#include "dmuon/comm/rank_groups.hpp"
#include "dmuon/engine/engine.hpp"
#include "dmuon/engine/step/step_schedule.hpp"
#include "dmuon/engine/step/step_volume.hpp"
#include "dmuon/engine/verify/reference.hpp"
#include "dmuon/plan/comm_volume.hpp"
#include "kokkos_environment.hpp"
#include "mpi_test_util.hpp"
#include "plan_setup.hpp"
#include "test_plan_options.hpp"

namespace {

using namespace dmuon;

using Setup = test::PlanSetup;

Setup make_setup(const std::string& topology, int replicate = 1,
                 plan::Reshard reshard = plan::Reshard::z3) {
  test::PlanOptions po;
  po.topology = topology;
  po.replicate = replicate;
  po.reshard = reshard;
  return test::make_plan_setup(po);
}

engine::EngineOptions small_options(engine::Method m) {
  engine::EngineOptions o;
  o.step.method = m;
  o.step.global_tokens = 8;  // the same global batch at every rank count
  o.run.steps = 2;
  o.run.warmup = 0;
  o.run.seed = 7;
  o.run.keep_final_weights = true;
  return o;
}

TEST(EngineMpi, Z2AndZ3GiveIdenticalWeights) {
  const auto s = make_setup("moe");
  const auto s2 = make_setup("moe", 1, plan::Reshard::z2);  // moe ties nothing: same sites
  for (auto m : test::axis({engine::Method::dmuon, engine::Method::fsdp_muon})) {
    auto o = small_options(m);
    o.step.reshard = plan::Reshard::z3;
    const auto z3 = engine::run_engine(s.topo.tree, s.plan, o, MPI_COMM_WORLD);
    o.step.reshard = plan::Reshard::z2;
    const auto z2 = engine::run_engine(s2.topo.tree, s2.plan, o, MPI_COMM_WORLD);
    EXPECT_TRUE(z3.audit_ok) << z3.audit_message;
    EXPECT_TRUE(z2.audit_ok) << z2.audit_message;
    if (test::world_rank() == 0) {
      ASSERT_EQ(z3.final_weights.size(), z2.final_weights.size());
      for (std::size_t i = 0; i < z3.final_weights.size(); ++i)
        EXPECT_EQ(z3.final_weights[i], z2.final_weights[i])
            << engine::method_name(m) << " param " << i;
    }
  }
}

TEST(EngineMpi, CheckPassesForEveryTopologyAndMethod) {
  for (const char* t : test::axis({"moe", "sequential", "vla", "nested", "llm", "moe-llm"})) {
    const auto s = make_setup(t);
    for (auto m : {engine::Method::dmuon, engine::Method::fsdp_adamw, engine::Method::fsdp_muon,
                   engine::Method::ddp_muon}) {
      auto o = small_options(m);
      o.run.check = true;
      const auto r = engine::run_engine(s.topo.tree, s.plan, o, MPI_COMM_WORLD);
      EXPECT_TRUE(r.audit_ok) << t << " " << engine::method_name(m) << ": " << r.audit_message;
      EXPECT_TRUE(r.check_passed) << t << " " << engine::method_name(m) << ": max rel error "
                                  << r.max_rel_error << " at " << r.worst_param;
    }
  }
}

TEST(EngineMpi, DmuonBytesEqualPrediction) {
  for (const char* t : test::axis({"moe", "nested", "moe-llm"})) {
    for (auto rs : {plan::Reshard::z3, plan::Reshard::z2}) {
      const auto s = make_setup(t, 1, rs);
      auto o = small_options(engine::Method::dmuon);
      o.step.compute = engine::Compute::none;
      o.step.reshard = rs;
      const auto r = engine::run_engine(s.topo.tree, s.plan, o, MPI_COMM_WORLD);
      const auto v =
          engine::predict_step_volume(s.topo.tree, s.plan, engine::volume_options(o.step)).owners;
      EXPECT_TRUE(r.audit_ok) << r.audit_message;  // every rank, every step, every kind
      const auto& bc = r.kinds[static_cast<std::size_t>(comm::CollectiveKind::broadcast)];
      const auto& rd = r.kinds[static_cast<std::size_t>(comm::CollectiveKind::reduce)];
      EXPECT_EQ(bc.bytes_measured, v.broadcast.max_bytes()) << t;
      EXPECT_EQ(rd.bytes_measured, v.reduce.max_bytes()) << t;
      EXPECT_EQ(bc.calls_per_step, v.broadcast.max_calls()) << t;
      EXPECT_EQ(rd.calls_per_step, v.reduce.max_calls()) << t;
      // Hand-counted: 4 hooks fire per site in both modes; Z3 communicates at 3, Z2 at 2.
      const auto sites = static_cast<std::int64_t>(s.plan.hooks.sites.size());
      EXPECT_EQ(r.hook_calls_per_step, 4 * sites) << t;
      EXPECT_EQ(r.hook_comm_calls_per_step, (rs == plan::Reshard::z3 ? 3 : 2) * sites) << t;
    }
  }
}

TEST(EngineMpi, DmuonMatchesDdpMuon) {
  const auto s = make_setup("llm");
  const auto a =
      engine::run_engine(s.topo.tree, s.plan, small_options(engine::Method::dmuon), MPI_COMM_WORLD);
  const auto b = engine::run_engine(s.topo.tree, s.plan, small_options(engine::Method::ddp_muon),
                                    MPI_COMM_WORLD);
  if (test::world_rank() == 0) {
    std::string worst;
    const double err =
        engine::max_relative_error(s.topo.tree, a.final_weights, b.final_weights, &worst);
    EXPECT_LT(err, 1e-4) << worst;
  }
}

// Counted independently of the engine: distinct (site, owner rank) pairs of the plan.
std::int64_t site_owner_pairs(const plan::Plan& p) {
  std::int64_t pairs = 0;
  for (const auto& site : p.hooks.sites) {
    std::set<int> owners;
    for (int pid : site.params) owners.insert(p.partition.owner_rank(pid));
    pairs += static_cast<std::int64_t>(owners.size());
  }
  return pairs;
}

const engine::KindResult& channel(const engine::RunResult& r, engine::CommGroup g,
                                  comm::CollectiveKind k) {
  return r.kinds[engine::channel_index(g, k)];
}

void expect_close_weights(const Setup& s, const engine::RunResult& a, const engine::RunResult& b,
                          double tolerance, const std::string& what) {
  if (test::world_rank() != 0) return;
  std::string worst;
  const double err =
      engine::max_relative_error(s.topo.tree, a.final_weights, b.final_weights, &worst);
  EXPECT_LT(err, tolerance) << what << ": worst " << worst;
}

TEST(EngineMpi, PrefetchKeepsWeightsCountsAndHooks) {
  const auto s = make_setup("vla");
  for (auto m : {engine::Method::dmuon, engine::Method::fsdp_muon}) {
    auto o = small_options(m);
    const auto base = engine::run_engine(s.topo.tree, s.plan, o, MPI_COMM_WORLD);
    o.step.prefetch = 2;
    const auto ahead = engine::run_engine(s.topo.tree, s.plan, o, MPI_COMM_WORLD);
    EXPECT_TRUE(ahead.audit_ok) << ahead.audit_message;
    EXPECT_EQ(ahead.hook_calls_per_step, base.hook_calls_per_step);
    for (std::size_t c = 0; c < engine::kChannelCount; ++c)
      EXPECT_EQ(ahead.kinds[c].calls_per_step, base.kinds[c].calls_per_step)
          << engine::channel_name(c);
    // More buffers live at once, never fewer.
    EXPECT_GE(ahead.peak_packed_bytes, base.peak_packed_bytes);
    if (test::world_rank() == 0) {
      EXPECT_EQ(ahead.final_weights, base.final_weights);
    }
  }
}

TEST(EngineMpi, PackedGradReduceSameBytesFewerCalls) {
  const auto s = make_setup("moe");
  auto o = small_options(engine::Method::dmuon);
  const auto per_param = engine::run_engine(s.topo.tree, s.plan, o, MPI_COMM_WORLD);
  o.step.grad_reduce = plan::GradReduce::packed;
  const auto packed = engine::run_engine(s.topo.tree, s.plan, o, MPI_COMM_WORLD);
  EXPECT_TRUE(packed.audit_ok) << packed.audit_message;
  const auto& rp = channel(per_param, engine::CommGroup::shard, comm::CollectiveKind::reduce);
  const auto& rk = channel(packed, engine::CommGroup::shard, comm::CollectiveKind::reduce);
  EXPECT_EQ(rk.calls_per_step, site_owner_pairs(s.plan));
  EXPECT_LT(rk.calls_per_step, rp.calls_per_step);  // moe: several parameters per owner
  EXPECT_EQ(rk.bytes_measured, rp.bytes_measured);
  // The same sums, possibly in another order inside MPI: fp32 rounding only.
  expect_close_weights(s, packed, per_param, 1e-5, "packed vs per-param");
}

TEST(EngineMpi, HsdpMatchesOneDimensional) {
  if (test::world_size() % 2 != 0) GTEST_SKIP() << "R = 2 needs an even rank count";
  for (const char* t : test::axis({"vla", "moe"})) {
    const auto flat = make_setup(t, 1);
    const auto hsdp = make_setup(t, 2);
    for (auto m : {engine::Method::dmuon, engine::Method::fsdp_adamw, engine::Method::fsdp_muon}) {
      const auto o = small_options(m);
      const auto a = engine::run_engine(flat.topo.tree, flat.plan, o, MPI_COMM_WORLD);
      const auto b = engine::run_engine(hsdp.topo.tree, hsdp.plan, o, MPI_COMM_WORLD);
      EXPECT_TRUE(b.audit_ok) << t << " " << engine::method_name(m) << ": " << b.audit_message;
      EXPECT_EQ(b.replicate, 2);
      // Mean over rows of row means equals the global mean up to fp32 rounding.
      expect_close_weights(flat, b, a, 1e-5,
                           std::string(t) + " " + engine::method_name(m) + " HSDP vs 1-D");
    }
  }
}

TEST(EngineMpi, HsdpBytesEqualPrediction) {
  const int n = test::world_size();
  if (n == 1) GTEST_SKIP() << "HSDP needs R > 1";
  for (int R : {2, n}) {
    if (n % R != 0) continue;
    const auto s = make_setup("moe-llm", R);
    for (auto gr : {plan::GradReduce::per_param, plan::GradReduce::packed}) {
      auto o = small_options(engine::Method::dmuon);
      o.step.compute = engine::Compute::none;
      o.step.grad_reduce = gr;
      const auto r = engine::run_engine(s.topo.tree, s.plan, o, MPI_COMM_WORLD);
      const auto v =
          engine::predict_step_volume(s.topo.tree, s.plan, engine::volume_options(o.step)).owners;
      EXPECT_TRUE(r.audit_ok) << "R " << R << ": " << r.audit_message;
      using engine::CommGroup;
      using K = comm::CollectiveKind;
      EXPECT_EQ(channel(r, CommGroup::shard, K::broadcast).bytes_measured, v.broadcast.max_bytes());
      EXPECT_EQ(channel(r, CommGroup::shard, K::reduce).bytes_measured, v.reduce.max_bytes());
      EXPECT_EQ(channel(r, CommGroup::replicate, K::reduce).bytes_measured,
                v.reduce_stage2.max_bytes());
      EXPECT_EQ(channel(r, CommGroup::replicate, K::reduce).calls_per_step,
                v.reduce_stage2.max_calls());
      EXPECT_EQ(channel(r, CommGroup::replicate, K::broadcast).bytes_measured,
                v.replicate_broadcast.max_bytes());
      EXPECT_GT(channel(r, CommGroup::replicate, K::broadcast).bytes_measured, 0);
      // Non-dedicated FSDP shards are all-reduced across the R replicas.
      EXPECT_GT(channel(r, CommGroup::replicate, K::all_reduce).calls_per_step, 0);
    }
  }
}

TEST(EngineMpi, Bf16WireHalvesTheBytesAndPassesCheck) {
  for (int R : test::axis({2, 1})) {
    if (test::world_size() % R != 0) continue;
    const auto s = make_setup("moe", R);
    for (auto m : test::axis({engine::Method::dmuon, engine::Method::fsdp_adamw,
                              engine::Method::fsdp_muon, engine::Method::ddp_muon})) {
      auto o = small_options(m);
      // Enough samples for full-rank gradients (moe tiny's experts: 64 rows, 2 of 8 experts per
      // sample): below that Newton–Schulz amplifies bf16 rounding in the null directions.
      o.step.global_tokens = 512;
      const auto f32 = engine::run_engine(s.topo.tree, s.plan, o, MPI_COMM_WORLD);
      o.step.wire = kernels::Dtype::bf16;
      o.run.check = true;  // default tolerance for a bf16 wire: 8 bf16 unit roundoffs
      const auto bf16 = engine::run_engine(s.topo.tree, s.plan, o, MPI_COMM_WORLD);
      const std::string what = std::string(engine::method_name(m)) + " R " + std::to_string(R);
      EXPECT_TRUE(bf16.audit_ok) << what << ": " << bf16.audit_message;
      EXPECT_TRUE(bf16.check_passed)
          << what << ": max rel error " << bf16.max_rel_error << " at " << bf16.worst_param
          << " (tolerance " << bf16.check_tolerance << ")";
      EXPECT_DOUBLE_EQ(bf16.check_tolerance, 8.0 / 256);
      EXPECT_TRUE(bf16.check_note.empty()) << bf16.check_note;
      for (std::size_t c = 0; c < engine::kChannelCount; ++c) {
        const auto kind = engine::channel_kind(c);
        EXPECT_EQ(bf16.kinds[c].calls_per_step, f32.kinds[c].calls_per_step)
            << what << " " << engine::channel_name(c);
        // Everything but the fp32 masters' replicate broadcast travels in bf16: half the bytes
        // (all-reduces floor their element count, then multiply by the element size).
        const bool master = engine::channel_group(c) == engine::CommGroup::replicate &&
                            kind == comm::CollectiveKind::broadcast;
        EXPECT_EQ(bf16.kinds[c].bytes_measured,
                  master ? f32.kinds[c].bytes_measured : f32.kinds[c].bytes_measured / 2)
            << what << " " << engine::channel_name(c);
      }
    }
  }
}

TEST(EngineMpi, OptimizerPipelinesComputeTheSameWeights) {
  const int R = test::world_size() % 2 == 0 ? 2 : 1;
  const auto s = make_setup("vla", R);
  for (auto m :
       test::axis({engine::Method::dmuon, engine::Method::fsdp_muon, engine::Method::ddp_muon})) {
    auto o = small_options(m);
    const auto per_group = engine::run_engine(s.topo.tree, s.plan, o, MPI_COMM_WORLD);
    o.step.pipeline = engine::OptimizerPipeline::all_then_publish;
    const auto all = engine::run_engine(s.topo.tree, s.plan, o, MPI_COMM_WORLD);
    EXPECT_TRUE(all.audit_ok) << all.audit_message;
    for (std::size_t c = 0; c < engine::kChannelCount; ++c)
      EXPECT_EQ(all.kinds[c].bytes_measured, per_group.kinds[c].bytes_measured)
          << engine::channel_name(c);
    if (test::world_rank() == 0) {
      EXPECT_EQ(all.final_weights, per_group.final_weights) << engine::method_name(m);
    }
  }
}

TEST(EngineMpi, DirectAndGramNewtonSchulzBothPassCheck) {
  const auto s = make_setup("llm");
  auto o = small_options(engine::Method::dmuon);
  o.run.check = true;
  for (auto ns : {kernels::NsVariant::gram, kernels::NsVariant::direct}) {
    o.backend.ns = ns;
    const auto r = engine::run_engine(s.topo.tree, s.plan, o, MPI_COMM_WORLD);
    EXPECT_TRUE(r.check_passed) << kernels::to_string(ns) << ": " << r.max_rel_error;
    EXPECT_DOUBLE_EQ(r.check_tolerance, 1e-4);
  }
}

TEST(EngineMpi, FinalWeightsStayOnTheirRanksUnlessAsked) {
  const auto s = make_setup("moe");
  auto o = small_options(engine::Method::dmuon);
  o.run.keep_final_weights = false;
  const auto r = engine::run_engine(s.topo.tree, s.plan, o, MPI_COMM_WORLD);
  EXPECT_TRUE(r.final_weights.empty()) << "the full model was gathered without --check";
}

TEST(EngineMpi, APlanForAnotherReshardIsBadInput) {
  const auto s = make_setup("moe");  // Z3 sites
  auto o = small_options(engine::Method::dmuon);
  o.step.reshard = plan::Reshard::z2;
  EXPECT_THROW((void)engine::run_engine(s.topo.tree, s.plan, o, MPI_COMM_WORLD), InputError);
}

TEST(EngineMpi, DeviceCudaWithoutAGpuIsBadInputOnEveryRank) {
  // CI builds the CUDA backend but has no GPU; a build without CUDA refuses it too.
  const auto s = make_setup("moe");
  auto o = small_options(engine::Method::dmuon);
  o.backend.device = engine::Device::cuda;
  try {
    (void)engine::run_engine(s.topo.tree, s.plan, o, MPI_COMM_WORLD);
    GTEST_SKIP() << "a GPU per rank is present: the device engine ran";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--device cuda"), std::string::npos) << e.what();
  }
}

// --trace (dmuon_bench): this rank's timeline against its own schedule, which the test builds
// independently with make_layout/make_schedule: per step every compute op once on the compute
// track, every issue op once on a stream track with the payload its collectives_of() calls
// carry; no negative span and no overlap on one (track, lane).
TEST(EngineMpi, TraceHoldsEveryOpOncePerStepWithItsBytes) {
  for (const char* topology : test::axis({"moe", "llm"}))
    for (auto m : {engine::Method::dmuon, engine::Method::fsdp_adamw}) {
      const std::string what = std::string(topology) + " " + engine::method_name(m);
      const auto s = make_setup(topology);
      auto o = small_options(m);
      o.run.warmup = 1;
      o.run.trace = true;
      const auto r = engine::run_engine(s.topo.tree, s.plan, o, MPI_COMM_WORLD);
      Trace trace({test::world_rank()}, test::world_size(), "measured");
      trace.add_spans_json(r.trace_spans);
      const comm::RankGroups groups(MPI_COMM_WORLD, engine::method_grid(s.plan, m));
      const auto layout = engine::make_layout(s.topo.tree, s.plan, o.step, groups.world_rank());
      std::vector<std::string> compute;
      std::vector<std::pair<std::string, std::int64_t>> batches;
      for (const auto& op : engine::make_schedule(layout, o.step)) {
        const std::string name =
            std::string(engine::op_name(op.op)) + " g" + std::to_string(op.group);
        const auto cls = engine::op_traits(op.op).cls;
        if (cls == engine::OpClass::compute) compute.push_back(name);
        if (cls != engine::OpClass::issue) continue;
        std::int64_t bytes = 0;
        for (const auto& c : engine::collectives_of(layout, op, o.step))
          bytes += c.count * static_cast<std::int64_t>(comm::dtype_size(c.dtype));
        batches.emplace_back(name, bytes);
      }
      std::sort(compute.begin(), compute.end());
      std::sort(batches.begin(), batches.end());
      ASSERT_FALSE(compute.empty()) << what;
      ASSERT_FALSE(batches.empty()) << what;
      std::map<int, std::vector<std::string>> got_compute;
      std::map<int, std::vector<std::pair<std::string, std::int64_t>>> got_batches;
      std::map<int, std::vector<std::pair<double, double>>> lanes;
      for (const auto& sp : trace.spans()) {
        EXPECT_EQ(sp.rank, test::world_rank()) << what;
        EXPECT_GE(sp.duration_s, 0.0) << what;
        lanes[static_cast<int>(sp.track) + kTraceTrackCount * sp.lane].emplace_back(sp.start_s,
                                                                                    sp.duration_s);
        if (sp.track == TraceTrack::compute && sp.name.rfind("wait ", 0) != 0)
          got_compute[sp.step].push_back(sp.name);
        if (sp.track >= TraceTrack::weights)
          got_batches[sp.step].emplace_back(sp.name, sp.payload_bytes);
      }
      for (int step = 0; step < o.run.total_steps(); ++step) {
        auto c = got_compute[step];
        auto b = got_batches[step];
        std::sort(c.begin(), c.end());
        std::sort(b.begin(), b.end());
        EXPECT_EQ(c, compute) << what << " step " << step;
        EXPECT_EQ(b, batches) << what << " step " << step;
      }
      for (auto& [tid, spans] : lanes) {
        std::sort(spans.begin(), spans.end());
        for (std::size_t i = 1; i < spans.size(); ++i)
          EXPECT_GE(spans[i].first, spans[i - 1].first + spans[i - 1].second - 1e-9)
              << what << " track " << tid;
      }
    }
}

}  // namespace

// The bandwidth figures use nccl-tests' message sizes, derived here from the tree alone: in Z3
// every rank takes part in two broadcasts of each dedicated parameter (forward and backward)
// and one reduce, so S sums to 2·P_M·4 and P_M·4 bytes (fp32); FSDP's all-gathers move the
// padded full buffers (N·ceil(numel/N) elements) twice. The host observes completion, so the
// in-flight time is measured (finite, at most the step) wherever calls ran.
TEST(EngineMpi, BandwidthFiguresUseNcclTestsMessageSizes) {
  const auto s = make_setup("moe");
  const int world = test::world_size();
  std::int64_t dedicated = 0, padded_non_dedicated = 0, padded_all = 0;
  for (int pid : s.topo.tree.parameter_order()) {
    const std::int64_t n = s.topo.tree.parameter(pid).numel();
    const std::int64_t padded = (n + world - 1) / world * world;
    padded_all += padded;
    if (s.plan.hooks.site_of_param[static_cast<std::size_t>(pid)] >= 0)
      dedicated += n;
    else
      padded_non_dedicated += padded;
  }
  using comm::CollectiveKind;
  const auto shard = engine::CommGroup::shard;
  auto o = small_options(engine::Method::dmuon);
  o.step.compute = engine::Compute::none;
  const auto dm = engine::run_engine(s.topo.tree, s.plan, o, MPI_COMM_WORLD);
  const auto& bc = channel(dm, shard, CollectiveKind::broadcast);
  const auto& rd = channel(dm, shard, CollectiveKind::reduce);
  const auto& ag = channel(dm, shard, CollectiveKind::all_gather);
  EXPECT_EQ(bc.message_bytes, static_cast<double>(2 * dedicated * 4));
  EXPECT_EQ(rd.message_bytes, static_cast<double>(dedicated * 4));
  EXPECT_EQ(ag.message_bytes, static_cast<double>(2 * padded_non_dedicated * 4));
  EXPECT_EQ(bc.group_size, world);
  const double step = dm.phases_ms[static_cast<std::size_t>(engine::Phase::step)];
  for (const auto* k : {&bc, &rd}) {
    ASSERT_TRUE(std::isfinite(k->in_flight_ms));
    EXPECT_GE(k->in_flight_ms, 0.0);
    EXPECT_LE(k->in_flight_ms, step * 1.001 + 1e-3);  // a union of intervals inside the step
  }
  if (world > 1) {  // something crossed between ranks, which takes time
    EXPECT_GT(bc.in_flight_ms, 0.0);
    EXPECT_GT(rd.in_flight_ms, 0.0);
  }
  if (bc.in_flight_ms > 0) {
    EXPECT_DOUBLE_EQ(bc.algbw_gbps(), bc.message_bytes / (bc.in_flight_ms * 1e-3) / 1e9);
    // Broadcast's bus factor is 1 (0 on one rank: nothing crosses a link).
    EXPECT_DOUBLE_EQ(bc.busbw_gbps(CollectiveKind::broadcast), world > 1 ? bc.algbw_gbps() : 0.0);
  }

  auto fo = small_options(engine::Method::fsdp_adamw);
  fo.step.compute = engine::Compute::none;
  const auto fs = engine::run_engine(s.topo.tree, s.plan, fo, MPI_COMM_WORLD);
  const auto& fag = channel(fs, shard, CollectiveKind::all_gather);
  const auto& frs = channel(fs, shard, CollectiveKind::reduce_scatter);
  EXPECT_EQ(fag.message_bytes, static_cast<double>(2 * padded_all * 4));
  EXPECT_EQ(frs.message_bytes, static_cast<double>(padded_all * 4));
  // all_gather's bus factor (n-1)/n.
  if (fag.in_flight_ms > 0) {
    EXPECT_DOUBLE_EQ(fag.busbw_gbps(CollectiveKind::all_gather),
                     fag.algbw_gbps() * (world - 1) / world);
  }
}
