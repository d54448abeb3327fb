#pragma once
// Reductions of measured timings into the summary numbers (docs: results/README.md):
// per step, the step time is the slowest rank's sum over phases and a phase's time is the
// slowest rank's time in it; the summary reports medians over the timed steps, in ms.

#include <map>
#include <string>
#include <vector>

#include "dmuon/results/run_record.hpp"

namespace dmuon::results {

/// Median of `v` (mean of the middle two for even sizes); NaN for an empty vector.
double median(std::vector<double> v);

/// {"step_ms": ..., "<phase>_ms": ...} for every phase; empty when there are no steps.
std::map<std::string, double> timing_medians(const Timings& t);

/// The run's median step time in ms: summary "step_ms" when present, else from its timings;
/// NaN when neither exists.
double run_step_ms(const RunRecord& r);
/// The same for the optimizer phase ("optimizer_ms", else timing phase "optimizer").
double run_optimizer_ms(const RunRecord& r);

}  // namespace dmuon::results
