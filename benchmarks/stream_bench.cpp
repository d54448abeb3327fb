// Memory-bound kernels: a STREAM-like copy (the yardstick) and the elementwise optimizer
// kernels. bytes_per_second counts the compulsory traffic per element:
//   copy 8 B (r+w), muon_momentum 16 B (r g, r/w buf, w input), muon_apply 12 B (r/w w, r O),
//   adamw 32 B (r g twice: finiteness check, then update; r/w w, m, v), pack 8 B (r+w).
#include <benchmark/benchmark.h>

#include <vector>

#include "kernels/adamw.hpp"
#include "kernels/muon.hpp"
#include "kernels/pack.hpp"

namespace {

namespace host = dmuon::kernels::host;
constexpr long kElems = 1L << 23;  // 32 MiB per fp32 array: well beyond the caches

void finish(benchmark::State& state, double bytes_per_elem) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0) *
                          static_cast<int64_t>(bytes_per_elem));
}

void BM_Copy(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<float> a(n, 1.0f), b(n, 0.0f);
  for (auto _ : state) {
    host::copy(a.data(), b.data(), n);
    benchmark::ClobberMemory();
  }
  finish(state, 8);
}
BENCHMARK(BM_Copy)->Arg(kElems)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_MuonMomentum(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<float> g(n, 0.1f), buf(n, 0.0f), in(n, 0.0f);
  for (auto _ : state) {
    host::muon_momentum(g.data(), buf.data(), in.data(), n, 2, 0.95f, true);
    benchmark::ClobberMemory();
  }
  finish(state, 16);
}
BENCHMARK(BM_MuonMomentum)->Arg(kElems)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_MuonApply(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<float> w(n, 1.0f), o(n, 0.01f);
  for (auto _ : state) {
    host::muon_apply(w.data(), o.data(), n, 0.02f, 0.0f, 0.2f);
    benchmark::ClobberMemory();
  }
  finish(state, 12);
}
BENCHMARK(BM_MuonApply)->Arg(kElems)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_AdamW(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<float> w(n, 1.0f), g(n, 0.1f), m(n, 0.0f), v(n, 0.0f);
  long step = 1;
  for (auto _ : state) {
    host::adamw_step(w.data(), g.data(), m.data(), v.data(), n, step++,
                     dmuon::kernels::AdamWConfig{}, "bench");
    benchmark::ClobberMemory();
  }
  finish(state, 32);
}
BENCHMARK(BM_AdamW)->Arg(kElems)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Pack(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  constexpr std::size_t kParts = 8;
  std::vector<std::vector<float>> parts(kParts, std::vector<float>(n / kParts, 1.0f));
  std::vector<dmuon::kernels::ConstSlice> slices;
  for (const auto& p : parts) slices.push_back({p.data(), p.size()});
  std::vector<float> packed(n);
  for (auto _ : state) {
    host::pack(slices.data(), slices.size(), packed.data(), packed.size());
    benchmark::ClobberMemory();
  }
  finish(state, 8);
}
BENCHMARK(BM_Pack)->Arg(kElems)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
