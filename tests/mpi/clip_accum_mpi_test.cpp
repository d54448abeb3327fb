// --clip-norm and --accum under MPI at 1, 2, 4, 8 ranks, every method, 1-D and HSDP:
//   - --check against the one-process reference passes and the byte audit holds;
//   - clipping adds exactly one world all_reduce call of 0 bytes (floor(1·(N−1)/N)·4) and
//     leaves every other channel as the unclipped run has it;
//   - a small threshold really clips (the final weights move far beyond --check's tolerance,
//     so --check would catch a run that skipped it); a huge one changes nothing, bit for bit;
//   - accumulation over K micro-batches multiplies the weight collectives (broadcast,
//     all_gather) by K and leaves every gradient channel as K = 1 has it, and ends at the same
//     weights as one micro-step over the same batch (the one-process reference with K = 1).

#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <utility>
#include <vector>

#include "dmuon/engine/engine.hpp"
#include "dmuon/engine/verify/reference.hpp"
#include "kokkos_environment.hpp"
#include "mpi_test_util.hpp"
#include "plan_setup.hpp"
#include "test_plan_options.hpp"

namespace {

using namespace dmuon;
using comm::CollectiveKind;
using engine::CommGroup;
using engine::Method;

using Setup = test::PlanSetup;

Setup make_setup(int replicate, plan::Reshard reshard) {
  test::PlanOptions po;
  po.topology = "moe";
  po.sets = {"d=64", "d_ff=128"};  // tiny halved: the same structure at an eighth of the NS work
  po.replicate = replicate;
  po.reshard = reshard;
  return test::make_plan_setup(po);
}

// HSDP where the world allows two rows.
int replicate_here() {
  return test::world_size() >= 4 ? 2 : 1;
}

engine::EngineOptions options(Method m, plan::Reshard rs) {
  engine::EngineOptions o;
  o.step.method = m;
  o.step.reshard = rs;
  o.step.global_tokens = 8;
  o.run.steps = 2;
  o.run.warmup = 0;
  o.run.seed = 11;
  o.run.keep_final_weights = true;
  return o;
}

const Method kMethods[] = {Method::dmuon, Method::fsdp_adamw, Method::fsdp_muon, Method::ddp_muon};

std::string what(Method m, int replicate, plan::Reshard rs) {
  return std::string(engine::method_name(m)) + " R=" + std::to_string(replicate) + " " +
         plan::reshard_name(rs) + " N=" + std::to_string(test::world_size());
}

std::int64_t calls(const engine::RunResult& r, CommGroup g, CollectiveKind k) {
  return r.kinds[engine::channel_index(g, k)].calls_per_step;
}

// 1-D Z3 and Z2, HSDP Z3 (where the world has 4 ranks or more).
// HSDP first: at 8 ranks (R = 2 x G = 4) it is the one layout run (test::axis).
std::vector<std::pair<int, plan::Reshard>> layouts() {
  return test::axis<std::pair<int, plan::Reshard>>(
      {{2, plan::Reshard::z3}, {1, plan::Reshard::z3}, {1, plan::Reshard::z2}});
}

TEST(ClipNormMpi, CheckPassesAuditHoldsOneWorldAllReduce) {
  for (auto [replicate, rs] : layouts()) {
    if (replicate > replicate_here()) continue;
    const auto s = make_setup(replicate, rs);
    for (auto m : kMethods) {
      auto o = options(m, rs);
      const auto plain = engine::run_engine(s.topo.tree, s.plan, o, MPI_COMM_WORLD);
      // Far below the gradients' norms: every step clips, down to where AdamW's epsilon and
      // Newton–Schulz's normalisation no longer hide the scale (both are nearly scale-free).
      o.step.clip_norm = 1e-9;
      o.run.check = true;
      for (auto type : {engine::ClipNormType::two, engine::ClipNormType::inf}) {
        if (type == engine::ClipNormType::inf && replicate > 1) continue;
        {
          o.step.clip_norm_type = type;
          const auto r = engine::run_engine(s.topo.tree, s.plan, o, MPI_COMM_WORLD);
          const auto w = what(m, replicate, rs) + (type == engine::ClipNormType::inf ? " inf" : "");
          EXPECT_TRUE(r.audit_ok) << w << ": " << r.audit_message;
          EXPECT_TRUE(r.checked && r.check_passed) << w << ": " << r.max_rel_error;
          for (std::size_t ch = 0; ch < engine::kChannelCount; ++ch) {
            const bool norm =
                ch == engine::channel_index(CommGroup::world, CollectiveKind::all_reduce);
            EXPECT_EQ(r.kinds[ch].calls_per_step, plain.kinds[ch].calls_per_step + (norm ? 1 : 0))
                << w << " " << engine::channel_name(ch);
            // One fp32 over N ranks: floor(1·(N−1)/N) = 0 elements under the convention.
            EXPECT_EQ(r.kinds[ch].bytes_measured, plain.kinds[ch].bytes_measured)
                << w << " " << engine::channel_name(ch);
            EXPECT_EQ(r.kinds[ch].bytes_formula, r.kinds[ch].bytes_measured) << w;
          }
          // Clipping really happened: the weights are far from the unclipped run's.
          if (test::world_rank() == 0) {
            EXPECT_GT(engine::max_relative_error(s.topo.tree, r.final_weights, plain.final_weights),
                      10 * r.check_tolerance)
                << w;
          }
        }
      }
    }
  }
}

TEST(ClipNormMpi, HugeThresholdChangesNothing) {
  const auto s = make_setup(replicate_here(), plan::Reshard::z3);
  for (auto m : {Method::dmuon, Method::ddp_muon}) {
    auto o = options(m, plan::Reshard::z3);
    const auto plain = engine::run_engine(s.topo.tree, s.plan, o, MPI_COMM_WORLD);
    o.step.clip_norm = 1e20;
    o.run.check = true;
    const auto r = engine::run_engine(s.topo.tree, s.plan, o, MPI_COMM_WORLD);
    EXPECT_TRUE(r.audit_ok) << r.audit_message;
    EXPECT_TRUE(r.check_passed) << what(m, replicate_here(), plan::Reshard::z3);
    EXPECT_EQ(calls(r, CommGroup::world, CollectiveKind::all_reduce), 1);
    if (test::world_rank() == 0) {
      EXPECT_EQ(r.final_weights, plain.final_weights);
    }
  }
}

TEST(AccumMpi, WeightsCollectivesTimesKReducesOnceCheckPasses) {
  for (auto [replicate, rs] : layouts()) {
    if (replicate > replicate_here()) continue;
    {
      const auto s = make_setup(replicate, rs);
      for (auto m : kMethods) {
        auto o = options(m, rs);
        const auto one = engine::run_engine(s.topo.tree, s.plan, o, MPI_COMM_WORLD);
        // The same batch in one micro-step, computed in one process: independent of the
        // accumulation code paths.
        std::vector<std::vector<float>> whole;
        if (test::world_rank() == 0)
          whole = engine::reference_weights(s.topo.tree, s.plan, o, test::world_size() / replicate);
        // K = 3 does not divide the 8 samples (nor an expert's 2: some micro-batches are empty).
        for (int k : {3}) {
          o.step.accum = k;
          o.run.check = true;
          const auto r = engine::run_engine(s.topo.tree, s.plan, o, MPI_COMM_WORLD);
          const auto w = what(m, replicate, rs) + " K=" + std::to_string(k);
          EXPECT_TRUE(r.audit_ok) << w << ": " << r.audit_message;
          EXPECT_TRUE(r.checked && r.check_passed) << w << ": " << r.max_rel_error;
          for (std::size_t ch = 0; ch < engine::kChannelCount; ++ch) {
            const auto kind = engine::channel_kind(ch);
            const bool weights =
                engine::channel_group(ch) == CommGroup::shard &&
                (kind == CollectiveKind::broadcast || kind == CollectiveKind::all_gather);
            // fsdp-muon's optimizer all-gather of each dedicated parameter's Nesterov input
            // stays once: (G−1)·⌈n/G⌉·4 bytes each, the rest (weights) × K.
            std::int64_t once_calls = 0, once_bytes = 0;
            if (m == Method::fsdp_muon && weights && kind == CollectiveKind::all_gather) {
              const std::int64_t g = test::world_size() / replicate;
              for (int pid : s.topo.tree.parameter_order())
                if (s.plan.hooks.site_of_param[static_cast<std::size_t>(pid)] >= 0) {
                  const std::int64_t n = s.topo.tree.parameter(pid).numel();
                  ++once_calls;
                  once_bytes += (g - 1) * ((n + g - 1) / g) * 4;
                }
            }
            if (once_calls > 0) {
              const auto& k1 = one.kinds[ch];
              EXPECT_EQ(r.kinds[ch].calls_per_step,
                        k * (k1.calls_per_step - once_calls) + once_calls)
                  << w;
              EXPECT_EQ(r.kinds[ch].bytes_measured,
                        k * (k1.bytes_measured - once_bytes) + once_bytes)
                  << w;
              continue;
            }
            const std::int64_t factor = weights ? k : 1;
            EXPECT_EQ(r.kinds[ch].calls_per_step, factor * one.kinds[ch].calls_per_step)
                << w << " " << engine::channel_name(ch);
            EXPECT_EQ(r.kinds[ch].bytes_measured, factor * one.kinds[ch].bytes_measured)
                << w << " " << engine::channel_name(ch);
          }
          EXPECT_EQ(r.hook_calls_per_step, k * one.hook_calls_per_step) << w;
          if (test::world_rank() == 0) {
            EXPECT_LE(engine::max_relative_error(s.topo.tree, r.final_weights, whole), 1e-4) << w;
          }
        }
      }
    }
  }
}

}  // namespace
