// The host engine's measured memory (docs/MEMORY.md "Measured") against the projection's
// memory model for the same rank layouts: every method with a shard group, Z3 and Z2, fp32
// wire, on the moe and llm tiny presets; the peak (max over ranks) within ±10 %.

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "dmuon/engine/engine.hpp"
#include "dmuon/engine/step/step_layout.hpp"
#include "dmuon/project/memory_model.hpp"
#include "kokkos_environment.hpp"
#include "mpi_test_util.hpp"
#include "plan_setup.hpp"
#include "test_plan_options.hpp"

namespace {

using namespace dmuon;

// The model's peak over every rank of the world (the lowest rank of equals), no activations:
// the runs have no --seq-len.
project::RankMemory modelled_peak(const test::PlanSetup& s, const engine::StepSpec& spec) {
  project::RankMemory top;
  bool any = false;
  for (int r = 0; r < test::world_size(); ++r) {
    const auto m = project::memory_of(engine::make_layout(s.topo.tree, s.plan, spec, r));
    if (!any || m.peak() > top.peak()) top = m;
    any = true;
  }
  return top;
}

std::string terms_line(const std::array<std::int64_t, engine::kMemoryTermCount>& t) {
  std::string out;
  for (std::size_t i = 0; i < t.size(); ++i)
    out += std::string(i ? " " : "") +
           engine::memory_term_name(static_cast<engine::MemoryTerm>(i)) + "=" +
           std::to_string(t[i]);
  return out;
}

TEST(MemoryMpi, HostPeakWithinTenPercentOfTheModel) {
  for (const char* topology : {"moe", "llm"})
    for (auto reshard : {plan::Reshard::z3, plan::Reshard::z2}) {
      test::PlanOptions po;
      po.topology = topology;
      po.reshard = reshard;
      const auto s = test::make_plan_setup(po);
      for (auto method :
           {engine::Method::dmuon, engine::Method::fsdp_adamw, engine::Method::fsdp_muon}) {
        engine::EngineOptions o;
        o.step.method = method;
        o.step.reshard = reshard;
        // The engine's own holding (fp32 momentum, a persistent Nesterov input): the memory
        // model's overlapped schedule; the reference's is the reference library's (MEMORY.md).
        o.step.dmuon_schedule = engine::DmuonSchedule::overlapped;
        o.step.global_tokens = 8;
        o.run.steps = 2;
        o.run.warmup = 0;
        const auto r = engine::run_engine(s.topo.tree, s.plan, o, MPI_COMM_WORLD);
        const auto& got = r.memory_measured;
        ASSERT_TRUE(got.measured);
        const auto want = modelled_peak(s, o.step);
        const double ratio = static_cast<double>(got.peak_bytes) / static_cast<double>(want.peak());
        const std::string what = std::string(topology) + " " + engine::method_name(method) + " " +
                                 plan::reshard_name(reshard) + " np" +
                                 std::to_string(test::world_size());
        if (test::world_rank() == 0) {
          std::array<std::int64_t, engine::kMemoryTermCount> model{};
          const auto terms = want.terms();
          for (std::size_t i = 0; i < model.size(); ++i) model[i] = terms[i].second;
          std::printf(
              "%s: measured %lld (r%d %s) model %lld (r%d %s) ratio %.4f\n"
              "  measured %s\n  model    %s\n  reserved %lld uncounted %lld\n",
              what.c_str(), static_cast<long long>(got.peak_bytes), got.rank, got.phase.c_str(),
              static_cast<long long>(want.peak()), want.rank,
              project::memory_phase_name(want.peak_phase()), ratio,
              terms_line(got.terms_at_peak).c_str(), terms_line(model).c_str(),
              static_cast<long long>(got.reserved_bytes),
              static_cast<long long>(got.uncounted_bytes));
        }
        EXPECT_NEAR(ratio, 1.0, 0.10) << what;
      }
    }
}

}  // namespace
