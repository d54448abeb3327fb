#pragma once
// Reductions of measured timings into samples and summary numbers (docs: results/README.md):
// per sample (one measured step of one repeat) the step time is the slowest rank's wall step
// (older files: its sum over phases) and a phase's time is the slowest rank's time in it; the
// summary reports medians over the samples, in ms.

#include <map>
#include <string>
#include <vector>

#include "dmuon/results/run_record.hpp"
#include "dmuon/results/summary_fields.hpp"

namespace dmuon::results {

/// Median of `v` (mean of the middle two for even sizes); NaN for an empty vector.
double median(std::vector<double> v);

/// Per sample, the slowest rank's step time in seconds: `step_seconds` when the file has it,
/// else the sum over the (disjoint) phases. Empty when there are no samples.
std::vector<double> step_samples(const Timings& t);

/// Per sample, the slowest rank's time in seconds summed over the phases whose name starts
/// with `prefix` (e.g. "optimizer": optimizer_ns + optimizer_other). Empty when no phase
/// matches or there are no samples.
std::vector<double> phase_samples(const Timings& t, const std::string& prefix);

/// {"step_ms": ..., "<phase>_ms": ...} for every phase; empty when there are no steps.
std::map<std::string, double> timing_medians(const Timings& t);

/// The run's median step time in ms: summary "step_ms" when present, else from its timings;
/// NaN when neither exists.
double run_step_ms(const RunRecord& r);
/// The same for the optimizer phase ("optimizer_ms", else timing phase "optimizer").
double run_optimizer_ms(const RunRecord& r);

}  // namespace dmuon::results
