#pragma once
// What rank 0 prints: the nccl-tests-style table (one row per BenchRun, then the degradation
// warnings grouped per boundary row, then the verdict footer), fitted to 160 columns unless
// --wide, or one JSON object with a `runs` array. No script should parse the table; use --json
// or the results file.

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "bench/bench_run.hpp"
#include "bench/samples.hpp"
#include "dmuon/model/topology.hpp"
#include "kernels/blas_info.hpp"
#include "options/run_options.hpp"

namespace dmuon::apps::bench {

/// The machine the invocation ran on, for the header and the JSON.
struct HostInfo {
  kernels::host::BlasInfo blas;
  double sgemm_gflops = 0;  ///< median over ranks, measured at start
  std::size_t sgemm_size = 0;
  std::vector<std::string> hostnames;  ///< per rank (rank 0 only)
  std::string warning;                 ///< the generic-kernel warning, "" when none
  std::string transport_settings;      ///< results::transport_settings() of rank 0
};

/// Significance level of the marks in the table (a row's step time against the fastest row's).
inline constexpr double kTableAlpha = 0.05;

/// Who prints the table and how its rows were obtained.
struct TableStyle {
  std::string title = "dmuon_bench";  ///< the first line's head
  /// One deterministic projected step per row (dmuon_project): no sample statistics, no
  /// measured-run prose.
  bool projected = false;
  /// Notes already printed (boundary legends, warnings); a sweep over several worlds passes one
  /// set so that each note shows once. nullptr: every table prints its own.
  std::set<std::string>* shown = nullptr;
  /// Lines placed after the notes and before the failure count and the closing verdict (the
  /// measured throughput): the table ends with its verdict.
  std::string before_verdict;
};

std::string format_table(const model::Topology& topo, const std::vector<plan::Plan>& plans,
                         const RunOptions& o, int world, const std::vector<BenchRun>& runs,
                         const std::string& sweep_source, const HostInfo& host,
                         const TableStyle& style = {});

/// "12.3 GB" / "456 MB" / "7.89 kB": `bytes` in the largest decimal unit that keeps it >= 1.
std::string bytes_text(double bytes);

/// "12.3 GB/s" / "185 kB/s": a rate given in GB/s, unit scaled the same way.
std::string rate_text(double gbps);

nlohmann::json to_json(const model::Topology& topo, const std::vector<plan::Plan>& plans,
                       const RunOptions& o, int world, const std::vector<BenchRun>& runs,
                       const HostInfo& host);

/// Failed audits plus failed checks over the measured rows (rejected rows are not failures).
int failures(const std::vector<BenchRun>& runs);

/// "# throughput: ..." one line per measured row: step median, tokens/s (and per rank) and,
/// when `model_flops_per_token` > 0 (a --seq-len run with a geometry), model TFLOP/s per rank
/// under `convention`, and the measured peak memory per rank (the host backend measures it:
/// engine/exec/memory_tracker.hpp); "" without a measured row.
std::string throughput_lines(const RunOptions& o, int world, const std::vector<BenchRun>& runs,
                             double model_flops_per_token, const char* convention);

/// A step column's text in at most `width` characters where it can: "median (min-max)" in ms,
/// with fewer digits, then "median (max +N%)", when longer; one sample: its value.
std::string spread_text(const Spread& s, std::size_t width);

/// `s` cut to `n` columns: its first n − 3 characters and "..." when longer (table cells).
std::string clip(const std::string& s, std::size_t n);

/// Wraps `text` (a '#' comment) into lines of at most `width` columns, continuation lines
/// indented "#   "; returns it unchanged (one line) when width is 0.
std::string wrap_comment(const std::string& text, std::size_t width);

}  // namespace dmuon::apps::bench
