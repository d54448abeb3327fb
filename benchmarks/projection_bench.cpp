// Projection cost at scale: deepseek-v3 (61 layers, 45,032 dedicated matrices) planned for a
// world of N ranks and projected for one method on the h100-ndr machine model (1-D, 4,096
// tokens per rank), at the default boundary (61 layer groups) and the recommended one (types
// Expert, MoE layer: about 15,000 hook sites, the finest the planner suggests). Counters: the
// projection's own split (build = layouts, schedules and programs of every rank; replay = the
// event loop), distinct programs (rank symmetry at work), distinct program chunks and their
// instructions (program_store.hpp), batches replayed, and the process's peak resident memory
// (a high-water mark: run one row per process to read a row's own).

#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <fmt/format.h>

#include <map>
#include <memory>
#include <utility>

#include "dmuon/model/topology.hpp"
#include "dmuon/plan/plan.hpp"
#include "dmuon/project/projection.hpp"
#include "version_flag.hpp"

namespace {

using namespace dmuon;

const model::Topology& deepseek() {
  static const auto topo = model::build_topology("moe-llm", "deepseek-v3", {});
  return topo;
}

const char* const kBoundaries[] = {"default", "recommended"};

const plan::Plan& plan_for(int world, int boundary) {
  static std::map<std::pair<int, int>, std::unique_ptr<plan::Plan>> cache;
  auto& p = cache[{world, boundary}];
  if (!p) {
    plan::PlanConfig c;
    c.dedicate_rule = deepseek().dedicate_rule;
    c.boundary = boundary == 0 ? "default" : deepseek().recommended_boundary;
    c.partition.shard = world;
    p = std::make_unique<plan::Plan>(plan::make_plan(deepseek().tree, c));
  }
  return *p;
}

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // kB on Linux
}

void BM_ProjectDeepseek(benchmark::State& state) {
  const int world = static_cast<int>(state.range(0));
  const auto method = state.range(1) == 0 ? engine::Method::dmuon : engine::Method::fsdp_adamw;
  const auto machine = project::load_machine("h100-ndr", DMUON_MACHINES_DIR);
  const int boundary = static_cast<int>(state.range(2));
  const auto& plan = plan_for(world, boundary);
  project::ProjectionOptions o;
  o.engine.step.method = method;
  o.engine.step.wire = kernels::Dtype::bf16;
  o.engine.step.tokens = 4096;
  project::Projection p;
  for (auto _ : state) {
    p = project::project(deepseek().tree, plan, machine, o);
    benchmark::DoNotOptimize(p.result.phases_ms);
  }
  state.SetLabel(fmt::format("{} {}", engine::method_name(method), kBoundaries[boundary]));
  state.counters["build_s"] = p.build_s;
  state.counters["replay_s"] = p.replay_s;
  state.counters["programs"] = static_cast<double>(p.programs);
  state.counters["chunks"] = static_cast<double>(p.chunks);
  state.counters["chunk_instructions"] = static_cast<double>(p.chunk_instructions);
  state.counters["batches"] = static_cast<double>(p.batches);
  state.counters["step_ms"] = p.result.phases_ms[static_cast<std::size_t>(engine::Phase::step)];
  state.counters["peak_rss_MB"] = peak_rss_mb();
}
BENCHMARK(BM_ProjectDeepseek)
    ->ArgsProduct({{64, 1024, 4096, 16384}, {0, 1}, {0, 1}})
    ->ArgNames({"world", "fsdp", "recommended"})
    ->Unit(benchmark::kSecond)
    ->Iterations(1);

}  // namespace

int main(int argc, char** argv) {
  if (dmuon::benchmarks::print_version_if_asked(argc, argv)) return 0;
  return dmuon::benchmarks::run_benchmarks(argc, argv);
}
