#pragma once
// Comparing two results files (dmuon_compare, a CI gate for boundary choices). Runs are
// matched by their key (topology, preset, boundary spec, strict, method, reshard, gradient
// reduce, prefetch, world size, replicate, owner strategy, cost model; duplicates pair up in
// file order). For a matched pair every deterministic quantity must be equal (status, hook
// sites and their paths and owners, hook calls per step, owner of each parameter, collective
// calls and bytes per kind and rank, formula bytes) and the median timings of B may exceed
// A's by at most the tolerance (B <= A * (1 + tol) for step_ms and optimizer_ms). Faster is an
// improvement, not a failure. A run of A with no partner in B is a failure (a configuration
// disappeared); a run only in B is reported as new.

#include <string>
#include <vector>

#include "dmuon/results/run_record.hpp"

namespace dmuon::results {

/// The matching key of a run, as one printable string.
std::string run_key(const RunRecord& r);

struct RunComparison {
  std::size_t a = 0, b = 0;  ///< run indices
  std::string key;
  std::string status;  ///< A's status ("ok" / "rejected")
  double a_step_ms = 0, b_step_ms = 0, a_opt_ms = 0, b_opt_ms = 0;  ///< NaN when absent
  std::vector<std::string> mismatches;    ///< deterministic differences, one line each
  std::vector<std::string> regressions;   ///< timings beyond the tolerance
  std::vector<std::string> improvements;  ///< timings better than A by more than the tolerance
  /// "OK", "FASTER", "SLOWER", "MISMATCH" (mismatch wins over slower).
  std::string check() const;
};

struct Comparison {
  double tolerance = 0.10;
  std::vector<RunComparison> runs;
  std::vector<std::size_t> only_a, only_b;  ///< run indices without a partner
  std::vector<std::string> only_a_keys, only_b_keys;
  int mismatches() const;   ///< matched runs with a deterministic difference + runs only in A
  int regressions() const;  ///< matched runs slower than the tolerance allows
  bool ok() const { return mismatches() == 0 && regressions() == 0; }
};

/// Compares B against the baseline A. `tolerance` >= 0 (0.10 = 10 %).
Comparison compare_results(const ResultsFile& a, const ResultsFile& b, double tolerance);

}  // namespace dmuon::results
