// dmuon_microbench main and the GEMM baseline. One Kokkos runtime for the whole binary.
// All timings are wall-clock (UseRealTime: BLAS may run threads). GFLOPS = FLOPs / s / 1e9;
// bytes_per_second counts every byte a kernel must read or write once.
#include <benchmark/benchmark.h>

#include <vector>

#include "kernels/linear.hpp"
#include "kernels/scoped_kokkos.hpp"
#include "version_flag.hpp"

namespace {

void BM_Sgemm(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n, 0.0f);
  for (auto _ : state) {
    dmuon::kernels::host::gemm(false, false, n, n, n, 1.0f, a.data(), b.data(), 0.0f, c.data());
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  const double flops = 2.0 * static_cast<double>(n) * n * n;
  state.counters["GFLOPS"] =
      benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Sgemm)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  if (dmuon::benchmarks::print_version_if_asked(argc, argv)) return 0;
  dmuon::kernels::host::ScopedKokkos kokkos;
  return dmuon::benchmarks::run_benchmarks(argc, argv);
}
