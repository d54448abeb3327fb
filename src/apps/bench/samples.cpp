#include "bench/samples.hpp"

#include <algorithm>
#include <utility>

#include "dmuon/results/summary.hpp"

namespace dmuon::apps::bench {
namespace {

constexpr std::size_t kNp = engine::kPhaseCount;

// Per sample, max over ranks of f(sample, rank) in ms.
template <typename F>
std::vector<double> per_sample_max(const engine::RunResult& r, int world, F f) {
  const auto ranks = static_cast<std::size_t>(world);
  const auto samples = static_cast<std::size_t>(sample_count(r, world));
  std::vector<double> out;
  for (std::size_t s = 0; s < samples; ++s) {
    double m = 0;
    for (std::size_t q = 0; q < ranks; ++q)
      m = std::max(m, f(&r.rank_phases_ms[(s * ranks + q) * kNp]));
    out.push_back(m);
  }
  return out;
}

Spread spread_of(const std::vector<double>& v) {
  Spread s;
  s.samples = v.size();
  if (v.empty()) return s;
  s.min = *std::min_element(v.begin(), v.end());
  s.max = *std::max_element(v.begin(), v.end());
  s.median = results::median(v);
  return s;
}

}  // namespace

std::int64_t sample_count(const engine::RunResult& r, int world_size) {
  if (world_size <= 0) return 0;
  return static_cast<std::int64_t>(r.rank_phases_ms.size() /
                                   (kNp * static_cast<std::size_t>(world_size)));
}

engine::RunResult merge_repeats(std::vector<engine::RunResult> repeats, int world_size) {
  engine::RunResult out = std::move(repeats.at(0));
  for (std::size_t i = 1; i < repeats.size(); ++i) {
    auto& r = repeats[i];
    out.rank_phases_ms.insert(out.rank_phases_ms.end(), r.rank_phases_ms.begin(),
                              r.rank_phases_ms.end());
    if (out.audit_ok && !r.audit_ok) {
      out.audit_ok = false;
      out.audit_message = r.audit_message;
    }
    if (r.checked) {
      out.check_passed = (out.checked ? out.check_passed : true) && r.check_passed;
      if (!out.checked || r.max_rel_error > out.max_rel_error) {
        out.max_rel_error = r.max_rel_error;
        out.worst_param = r.worst_param;
      }
      out.checked = true;
    }
    out.peak_packed_bytes = std::max(out.peak_packed_bytes, r.peak_packed_bytes);
  }
  if (!out.rank_phases_ms.empty())
    for (std::size_t p = 0; p < kNp; ++p)
      out.phases_ms[p] = phase_spread(out, static_cast<engine::Phase>(p), world_size).median;
  return out;
}

std::vector<double> phase_samples_ms(const engine::RunResult& r, engine::Phase p, int world_size) {
  const auto i = static_cast<std::size_t>(p);
  return per_sample_max(r, world_size, [i](const double* x) { return x[i]; });
}

Spread phase_spread(const engine::RunResult& r, engine::Phase p, int world_size) {
  return spread_of(phase_samples_ms(r, p, world_size));
}

Spread optimizer_spread(const engine::RunResult& r, int world_size) {
  const auto ns = static_cast<std::size_t>(engine::Phase::optimizer_ns);
  const auto other = static_cast<std::size_t>(engine::Phase::optimizer_other);
  return spread_of(
      per_sample_max(r, world_size, [&](const double* x) { return x[ns] + x[other]; }));
}

}  // namespace dmuon::apps::bench
