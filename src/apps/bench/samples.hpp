#pragma once
// Several engine runs of one configuration (--repeats) as one set of samples: a sample is one
// measured step of one repeat; the summary numbers are medians over all samples of the slowest
// rank, as for a single run (docs/METRICS.md). Spreads (min / median / max over samples) feed
// the table and the JSON; the per-sample, per-rank values go to the results file.

#include <cstdint>
#include <vector>

#include "dmuon/engine/step/run_result.hpp"

namespace dmuon::apps::bench {

/// Merges repeats (all of one configuration, in order) into one result: rank 0's per-rank
/// phase samples concatenated repeat-major and every median recomputed over all samples; the
/// audit and --check must hold in every repeat (the first failure is kept); the deterministic
/// counts are the first repeat's (every repeat has the same ones). Other ranks keep the first
/// repeat's medians (they print nothing). Requires at least one result.
engine::RunResult merge_repeats(std::vector<engine::RunResult> repeats, int world_size);

/// min / median / max over samples of the slowest rank's time in phase `p`, in ms (rank 0).
struct Spread {
  double min = 0, median = 0, max = 0;
  std::size_t samples = 0;
};
Spread phase_spread(const engine::RunResult& r, engine::Phase p, int world_size);
/// The same for the optimizer (optimizer_ns + optimizer_other per rank).
Spread optimizer_spread(const engine::RunResult& r, int world_size);

/// Per sample, the slowest rank's time in phase `p`, in ms (rank 0).
std::vector<double> phase_samples_ms(const engine::RunResult& r, engine::Phase p, int world_size);

/// Number of samples in rank 0's per-rank phase times.
std::int64_t sample_count(const engine::RunResult& r, int world_size);

}  // namespace dmuon::apps::bench
