#pragma once
// Comparing two results files (dmuon_compare, a CI gate for boundary choices). Runs are
// matched by their key: every input that changes a number (topology, preset, --set, dedication,
// boundary spec and strictness, method, owner strategy, cost model and plan options, reshard,
// gradient reduce, prefetch, device, wire and Newton–Schulz dtypes and form, optimizer
// pipeline, compute, global batch, steps, warm-up, seed, world size, replicate); duplicates
// pair up in file order. For a matched pair:
//  * every deterministic quantity must be equal: status, hook sites with their paths and
//    owners, hook calls per step, the owner of each parameter, the partition loads, collective
//    calls and bytes per kind and rank (measured and formula), the audit and --check verdicts;
//  * timings (unless deterministic-only): per sample (a measured step of a repeat) the step
//    time and the optimizer time of the slowest rank. B regressed when a one-sided
//    Mann–Whitney U test says B's samples are larger (p < alpha) AND B's median exceeds A's by
//    more than the tolerance (the minimum effect size): noise alone rarely does both. Faster
//    by the same rule is an improvement, not a failure. Samples too few for the test to reach
//    alpha leave the timing untested (reported, not a failure). Every test carries its minimum
//    detectable effect (detectable_effect.hpp). A non-finite or negative timing in either file
//    is a regression. Files from different kinds of machine (CPU or GPU model, BLAS kernels)
//    have their timings skipped unless any_machine is set. When the sides' machine probes
//    (the sgemm at start) disagree, every timing verdict is "unreliable" (machine_probe.hpp):
//    reported, neither a regression nor an improvement.
//  * several invocations per side (the same commands run again, one results file each): the
//    samples of one invocation share the machine's state of that moment, and on a shared
//    machine whole invocations shift by tens of percent; the U test over pooled samples cannot
//    tell that shift from a regression. So each side's invocations are also compared as units:
//    a regression must in addition put the median of B's invocation medians above the slowest
//    of A's invocation medians by more than the tolerance (an improvement: below the fastest
//    by more than it). With one invocation per side this is the rule above. Every further
//    file's deterministic quantities must equal those of its side's first file's partner in A.
// A run of A with no partner in B is a failure (a configuration disappeared); a run only in B
// is reported as new.

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "dmuon/results/detectable_effect.hpp"
#include "dmuon/results/machine_probe.hpp"
#include "dmuon/results/run_record.hpp"

namespace dmuon::results {

/// The matching key of a run as (name, value) fields, in a fixed order.
std::vector<std::pair<std::string, std::string>> run_key_fields(const RunRecord& r);
/// The same as one printable string ("name=value ...").
std::string run_key(const RunRecord& r);
/// Where two runs' keys differ, one "name: A vs B" per field; the plan and run option fields
/// are compared fragment by fragment; a fragment absent on one side reads as
/// `absent_fragments` says, else "-".
std::vector<std::string> key_differences(
    const RunRecord& a, const RunRecord& b,
    const std::map<std::string, std::string>& absent_fragments = {});

struct CompareOptions {
  double tolerance = 0.10;  ///< minimum effect: relative change of the median (0.1 = 10 %)
  double alpha = 0.05;      ///< significance level of the one-sided U test
  bool deterministic_only = false;
  /// Compare timings even when A and B ran on different kinds of machine (CPU/GPU model, BLAS
  /// kernels, device); by default such timings are not compared (a note says why).
  bool any_machine = false;
  /// What an absent fragment of plan_options / run_options means (label -> value: the option
  /// table's `older`), so a difference names both values ("ac: none vs full").
  std::map<std::string, std::string> absent_fragments;
};

/// One timing metric of a matched pair.
struct TimingTest {
  std::string metric;  ///< "step_ms" | "optimizer_ms"
  std::size_t n_a = 0, n_b = 0;
  double a_median = 0, a_min = 0, a_max = 0;  ///< ms; NaN when absent
  double b_median = 0, b_min = 0, b_max = 0;
  double change = 0;  ///< (b_median - a_median) / a_median
  /// Median of each invocation's samples, per side (one entry per results file).
  std::vector<double> a_invocations, b_invocations;
  /// Median of B's invocation medians relative to A's slowest (when B is slower) or fastest
  /// (when faster) invocation median, minus 1: the effect between invocations.
  double invocation_change = 0;
  double p_slower = 1, p_faster = 1;
  bool testable = false;  ///< both sides have samples and min_p < alpha
  /// The smallest slowdown the U test could flag with these samples (when both sides have some).
  DetectableEffect detectable;
  /// "same", "slower", "faster", "unreliable", "untested", "non-finite".
  std::string verdict = "untested";
  /// With verdict "unreliable": the verdict the samples gave ("slower", "faster", "same").
  std::string unreliable_verdict;
};

struct RunComparison {
  std::size_t a = 0, b = 0;  ///< run indices
  std::string key;
  std::string status;  ///< A's status ("ok" / "rejected")
  double a_step_ms = 0, b_step_ms = 0, a_opt_ms = 0, b_opt_ms = 0;  ///< medians, NaN when absent
  std::vector<TimingTest> timings;        ///< step_ms, optimizer_ms (empty: not compared)
  std::vector<std::string> mismatches;    ///< deterministic differences, one line each
  std::vector<std::string> regressions;   ///< significant slowdowns beyond the tolerance
  std::vector<std::string> improvements;  ///< significant speed-ups beyond the tolerance
  /// Timing verdicts the machine probes make unreliable, one line each (what the samples said).
  std::vector<std::string> unreliable;
  std::vector<std::string> notes;  ///< untested timings and similar, one line each
  /// "OK", "FASTER", "SLOWER", "MISMATCH" (mismatch wins over slower), "UNRELIABLE" (timings
  /// tested while the machine probes disagree, nothing else wrong), "UNTESTED" (timings could
  /// not be tested, nothing else wrong).
  std::string check() const;
  bool untested() const;
};

struct Comparison {
  CompareOptions options;
  std::vector<RunComparison> runs;
  std::vector<std::size_t> only_a, only_b;  ///< run indices without a partner
  std::vector<std::string> only_a_keys, only_b_keys;
  /// Per run of only_a: how the nearest run only in B differs ("ac: none vs full, seq_len: -
  /// vs 2048"; key_differences), "" when B has no run of its own.
  std::vector<std::string> only_a_nearest;
  /// Runs of a side's further file that the side's first file lacks (one line each): the
  /// invocations were not of the same commands. Each counts as a mismatch.
  std::vector<std::string> extra_runs;
  std::vector<std::string> notes;  ///< file-level remarks (different hosts, BLAS kernels, ...)
  bool timings_skipped = false;    ///< different machines: timings were not compared
  /// The sides' machine probes (measured() false when a side has none or timings were not
  /// compared).
  ProbeAgreement probe;
  /// Matched runs with a deterministic difference + runs only in A + extra_runs.
  int mismatches() const;
  int regressions() const;  ///< matched runs with a timing regression
  int untested() const;     ///< matched ok runs whose timings could not be tested
  int unreliable() const;   ///< matched runs with a timing verdict the probes made unreliable
  /// Unreliable timings are not a failure: like untested ones they are reported.
  bool ok() const { return mismatches() == 0 && regressions() == 0; }
};

/// Compares B against the baseline A. InputError for a tolerance < 0 or an alpha outside (0,1).
Comparison compare_results(const ResultsFile& a, const ResultsFile& b, const CompareOptions& o);
/// The same with several invocations per side (each non-empty; the first file of a side
/// decides the matching, the others are its repetitions). Pointers must outlive the call.
Comparison compare_results(const std::vector<const ResultsFile*>& a,
                           const std::vector<const ResultsFile*>& b, const CompareOptions& o);
/// The same with the default alpha and timings on.
Comparison compare_results(const ResultsFile& a, const ResultsFile& b, double tolerance);

}  // namespace dmuon::results
