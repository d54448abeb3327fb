// dmuon_compare: compares results files (A vs B, or several invocations per side) run by run:
// deterministic quantities exactly, timings by a one-sided Mann–Whitney U test over the
// per-step samples with a minimum effect size (and between invocations when a side has
// several) — and exits 3 on any mismatch or regression, so it can gate boundary choices in CI.
// Timing verdicts while the sides' sgemm probes disagree (the machine's state changed) are
// UNRELIABLE, exit 0 like UNTESTED: reported, not a failure. No MPI launch.

#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "common/run_main.hpp"
#include "compare/compare_output.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/results/compare.hpp"
#include "dmuon/results/results_reader.hpp"
#include "options/run_option_table.hpp"

namespace {

using namespace dmuon;

int compare(int argc, char** argv) {
  CLI::App app{
      "dmuon_compare: compare dmuon results files (A against B, or several invocations per side): "
      "deterministic quantities (hooks, sites, "
      "owners, loads, calls, bytes, audit, check) exactly, timings by a one-sided Mann-Whitney U "
      "test over the per-step samples with a minimum effect size. Each timing test prints its "
      "minimum detectable effect (mde %): B's samples moved onto A's median and shifted until "
      "the test gives p < alpha, that shift over A's median (n<k: too few samples to reach "
      "alpha at all). When the sides' machine probes (the sgemm rate dmuon_bench measures at "
      "start) differ by more than max(tolerance, 10 %), the timing verdicts are UNRELIABLE "
      "(not SLOWER/FASTER/OK); mismatches still fail. Exit 0 OK (also with UNTESTED or "
      "UNRELIABLE timings: reported, not failures; --json counts them), 2 bad input, 3 a "
      "mismatch or regression"};
  std::vector<std::string> pair, pas, pbs;
  results::CompareOptions o;
  bool json = false, wide = false;
  app.add_option("A B", pair,
                 "baseline results file A and the results file B to check against it (HDF5); "
                 "or give --baseline and --candidate")
      ->expected(2);
  app.add_option("--baseline", pas,
                 "several invocations of the baseline (one results file each, the same "
                 "commands run again): whole invocations are compared as well as samples")
      ->expected(1, 1 << 20);
  app.add_option("--candidate", pbs, "several invocations to check against the baseline")
      ->expected(1, 1 << 20);
  app.add_option("--time-tolerance", o.tolerance,
                 "minimum effect: B's median step/optimizer time must exceed A's by more than "
                 "this fraction (0.1 = 10 %) to count as a regression; also the machine "
                 "probes' threshold (at least 10 %)")
      ->capture_default_str();
  app.add_option("--alpha", o.alpha,
                 "significance level of the one-sided Mann-Whitney U test on the samples")
      ->capture_default_str();
  app.add_flag("--deterministic-only", o.deterministic_only,
               "compare hooks, sites, owners, loads, calls, bytes, audit and check only (no "
               "timings): the gate against a reference made on another machine");
  app.add_flag("--any-machine", o.any_machine,
               "compare timings even when A and B ran on different CPU/GPU models or BLAS "
               "kernels (by default only their deterministic quantities are compared)");
  app.add_flag("--json", json, "print one JSON object instead of the table");
  app.add_flag("--wide", wide, "do not abbreviate the run column (the table fits 160 columns)");
  if (!apps::parse_cli(app, argc, argv)) return apps::kOk;
  for (const auto& option : apps::options::run_option_table())
    if (option.key.older) o.absent_fragments[option.key.name] = *option.key.older;
  if (!pair.empty() && (!pas.empty() || !pbs.empty()))
    throw InputError(
        "give either two files (A B) or --baseline FILE... --candidate FILE..., not both");
  if (pair.empty() && (pas.empty() || pbs.empty()))
    throw InputError(
        "nothing to compare: give two files (A B) or both --baseline FILE... and "
        "--candidate FILE...");
  if (!pair.empty()) {
    pas = {pair[0]};
    pbs = {pair[1]};
  }
  std::vector<results::ResultsFile> fa, fb;
  for (const auto& p : pas) fa.push_back(results::read_results(p));
  for (const auto& p : pbs) fb.push_back(results::read_results(p));
  std::vector<const results::ResultsFile*> sa, sb;
  for (const auto& f : fa) sa.push_back(&f);
  for (const auto& f : fb) sb.push_back(&f);
  const auto c = results::compare_results(sa, sb, o);
  if (json)
    apps::compare::print_json(pas, pbs, c);
  else
    apps::compare::print_table(pas, fa, pbs, fb, c, wide);
  return c.ok() ? apps::kOk : apps::kCheckFailed;
}

}  // namespace

int main(int argc, char** argv) {
  return dmuon::apps::run_main("dmuon_compare", [&] { return compare(argc, argv); });
}
