// Newton–Schulz, direct and Gram forms, fp32 on the host. GFLOPS uses the *direct* FLOP count
// 5·(4m²n + 2m³) (m = min, n = max) for both forms, so a faster Gram form shows as a higher
// effective GFLOPS; compare with BM_Sgemm from the same run.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "kernels/newton_schulz.hpp"

namespace {

using dmuon::kernels::NsConfig;
using dmuon::kernels::NsVariant;

void run_ns(benchmark::State& state, NsVariant variant) {
  const auto rows = static_cast<std::size_t>(state.range(0));
  const auto cols = static_cast<std::size_t>(state.range(1));
  std::vector<float> g(rows * cols), out(rows * cols);
  std::mt19937 gen(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (auto& v : g) v = dist(gen);
  dmuon::kernels::host::NsWorkspace ws(rows, cols);  // sized once, outside the timed loop
  NsConfig cfg;
  cfg.variant = variant;
  for (auto _ : state) {
    dmuon::kernels::host::newton_schulz(g.data(), out.data(), rows, cols, cfg, ws, "bench");
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOPS"] =
      benchmark::Counter(dmuon::kernels::ns_direct_flops(rows, cols, cfg.steps) / 1e9,
                         benchmark::Counter::kIsIterationInvariantRate);
}

void BM_NsDirect(benchmark::State& state) {
  run_ns(state, NsVariant::direct);
}
void BM_NsGram(benchmark::State& state) {
  run_ns(state, NsVariant::gram);
}

void ns_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"rows", "cols"});
  for (const auto& [r, c] : {std::pair{1024, 1024}, {1024, 4096}, {4096, 1024}, {256, 1024}}) {
    b->Args({r, c});
  }
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}
BENCHMARK(BM_NsDirect)->Apply(ns_shapes);
BENCHMARK(BM_NsGram)->Apply(ns_shapes);

}  // namespace
