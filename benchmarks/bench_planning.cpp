// Planning cost: hook-site resolution and ownership partition over growing models and rank
// counts. Expected complexity: resolution O(P · depth); reference LPT O(U log S + U · k)
// (k = slots a layer key already uses); lpt_refine adds O(steps · |top slot| · U).

#include <benchmark/benchmark.h>

#include <map>

#include "dmuon/boundary/dedication.hpp"
#include "dmuon/boundary/hook_plan.hpp"
#include "dmuon/model/topology.hpp"
#include "dmuon/partition/partition.hpp"
#include "version_flag.hpp"

namespace {

using namespace dmuon;

struct Model {
  model::Topology topo;
  std::vector<int> dedicated;
};

// deepseek-v3 with its layer count scaled: range(0) layers (61 is the real model).
const Model& deepseek(int layers) {
  static std::map<int, Model> cache;
  auto it = cache.find(layers);
  if (it == cache.end()) {
    Model m{model::build_topology("moe-llm", "deepseek-v3", {{"layers", std::to_string(layers)}}),
            {}};
    m.dedicated = boundary::select_dedicated(m.topo.tree,
                                             boundary::DedicationRule::parse(m.topo.dedicate_rule));
    it = cache.emplace(layers, std::move(m)).first;
  }
  return it->second;
}

void BM_ResolveDefault(benchmark::State& state) {
  const auto& m = deepseek(static_cast<int>(state.range(0)));
  const auto policy = boundary::BoundaryPolicy::parse("default");
  for (auto _ : state)
    benchmark::DoNotOptimize(boundary::resolve_hook_plan(m.topo.tree, m.dedicated, policy));
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(m.dedicated.size()));
  state.SetComplexityN(static_cast<std::int64_t>(m.dedicated.size()));
}
BENCHMARK(BM_ResolveDefault)->Arg(4)->Arg(16)->Arg(61)->Unit(benchmark::kMillisecond)->Complexity();

void BM_ResolveTypes(benchmark::State& state) {
  const auto& m = deepseek(static_cast<int>(state.range(0)));
  const auto policy = boundary::BoundaryPolicy::parse("types:MoeExpert,MoeDecoderLayer");
  for (auto _ : state)
    benchmark::DoNotOptimize(boundary::resolve_hook_plan(m.topo.tree, m.dedicated, policy));
  state.SetComplexityN(static_cast<std::int64_t>(m.dedicated.size()));
}
BENCHMARK(BM_ResolveTypes)->Arg(4)->Arg(16)->Arg(61)->Unit(benchmark::kMillisecond)->Complexity();

void partition_bench(benchmark::State& state, partition::Strategy s) {
  const auto& m = deepseek(61);
  partition::PartitionOptions o;
  o.strategy = s;
  o.shard = static_cast<int>(state.range(0));
  for (auto _ : state)
    benchmark::DoNotOptimize(partition::partition_ownership(m.topo.tree, m.dedicated, o));
  state.SetComplexityN(state.range(0));
}

void BM_PartitionLpt(benchmark::State& state) {
  partition_bench(state, partition::Strategy::lpt);
}
BENCHMARK(BM_PartitionLpt)
    ->RangeMultiplier(8)
    ->Range(8, 4096)
    ->Unit(benchmark::kMillisecond)
    ->Complexity();

void BM_PartitionLptRefine(benchmark::State& state) {
  partition_bench(state, partition::Strategy::lpt_refine);
}
BENCHMARK(BM_PartitionLptRefine)
    ->RangeMultiplier(8)
    ->Range(8, 4096)
    ->Unit(benchmark::kMillisecond)
    ->Complexity();

// The budget: deepseek-v3 at world 4096, build + dedicate + resolve + partition.
void BM_DeepseekEndToEnd4096(benchmark::State& state) {
  for (auto _ : state) {
    auto topo = model::build_topology("moe-llm", "deepseek-v3");
    auto ded =
        boundary::select_dedicated(topo.tree, boundary::DedicationRule::parse(topo.dedicate_rule));
    auto plan =
        boundary::resolve_hook_plan(topo.tree, ded, boundary::BoundaryPolicy::parse("default"));
    partition::PartitionOptions o;
    o.shard = 4096;
    benchmark::DoNotOptimize(partition::partition_ownership(topo.tree, ded, o));
    benchmark::DoNotOptimize(plan);
  }
}
BENCHMARK(BM_DeepseekEndToEnd4096)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  if (dmuon::benchmarks::print_version_if_asked(argc, argv)) return 0;
  return dmuon::benchmarks::run_benchmarks(argc, argv);
}
