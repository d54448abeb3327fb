// dmuon_compare: compares two results files run by run — deterministic quantities exactly,
// median timings within a tolerance — and exits 3 on any mismatch or regression, so it can
// gate boundary choices in CI. No MPI launch.

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <nlohmann/json.hpp>

#include "common/run_main.hpp"
#include "dmuon/results/compare.hpp"
#include "dmuon/results/results_reader.hpp"

namespace {

using namespace dmuon;

std::string ms(double v) {
  return std::isnan(v) ? "-" : fmt::format("{:.4f}", v);
}

std::string pct(double a, double b) {
  if (std::isnan(a) || std::isnan(b) || !(a > 0)) return "-";
  return fmt::format("{:+.1f}", 100.0 * (b - a) / a);
}

nlohmann::json num(double v) {
  return std::isnan(v) ? nlohmann::json() : nlohmann::json(v);
}

void print_table(const std::string& pa, const results::ResultsFile& a, const std::string& pb,
                 const results::ResultsFile& b, const results::Comparison& c) {
  auto head = [](const char* tag, const std::string& p, const results::ResultsFile& f) {
    fmt::print("# {}: {}  ({} runs; suite {}, commit {:.12}, {}, world {}, {})\n", tag, p,
               f.runs.size(), f.provenance.suite_version, f.provenance.git_commit,
               f.provenance.build_type, f.provenance.world_size, f.provenance.date_utc);
  };
  fmt::print("# dmuon_compare\n");
  head("A", pa, a);
  head("B", pb, b);
  fmt::print(
      "# time tolerance {:.1f} %: B's median step_ms and optimizer_ms may exceed A's by at most "
      "this; deterministic quantities must match exactly\n#\n",
      100.0 * c.tolerance);
  fmt::print("# {:>3} {:>3}  {:<8} {:>10} {:>10} {:>7} {:>10} {:>10} {:>7}  {:<8}  {}\n", "A", "B",
             "status", "A step_ms", "B step_ms", "chg %", "A opt_ms", "B opt_ms", "chg %", "check",
             "run");
  for (const auto& r : c.runs) {
    fmt::print("  {:>3} {:>3}  {:<8} {:>10} {:>10} {:>7} {:>10} {:>10} {:>7}  {:<8}  {}\n", r.a,
               r.b, r.status, ms(r.a_step_ms), ms(r.b_step_ms), pct(r.a_step_ms, r.b_step_ms),
               ms(r.a_opt_ms), ms(r.b_opt_ms), pct(r.a_opt_ms, r.b_opt_ms), r.check(), r.key);
    for (const auto& m : r.mismatches) fmt::print("#     mismatch: {}\n", m);
    for (const auto& m : r.regressions) fmt::print("#     regression: {}\n", m);
    for (const auto& m : r.improvements) fmt::print("#     improvement: {}\n", m);
  }
  for (std::size_t i = 0; i < c.only_a.size(); ++i)
    fmt::print("  {:>3} {:>3}  {:<8} {:>10} {:>10} {:>7} {:>10} {:>10} {:>7}  {:<8}  {}\n",
               c.only_a[i], "-", "-", "-", "-", "-", "-", "-", "-", "MISSING", c.only_a_keys[i]);
  for (std::size_t i = 0; i < c.only_b.size(); ++i)
    fmt::print("  {:>3} {:>3}  {:<8} {:>10} {:>10} {:>7} {:>10} {:>10} {:>7}  {:<8}  {}\n", "-",
               c.only_b[i], "-", "-", "-", "-", "-", "-", "-", "NEW", c.only_b_keys[i]);
  fmt::print("#\n# matched runs: {}   only in A: {}   only in B: {}\n", c.runs.size(),
             c.only_a.size(), c.only_b.size());
  fmt::print("# deterministic mismatches: {}\n", c.mismatches());
  fmt::print("# regressions: {}\n", c.regressions());
  fmt::print("# {}\n", c.ok() ? "OK" : "FAILED");
}

void print_json(const std::string& pa, const std::string& pb, const results::Comparison& c) {
  nlohmann::json j;
  j["a"] = pa;
  j["b"] = pb;
  j["time_tolerance"] = c.tolerance;
  j["runs"] = nlohmann::json::array();
  for (const auto& r : c.runs)
    j["runs"].push_back({{"a", r.a},
                         {"b", r.b},
                         {"key", r.key},
                         {"status", r.status},
                         {"a_step_ms", num(r.a_step_ms)},
                         {"b_step_ms", num(r.b_step_ms)},
                         {"a_optimizer_ms", num(r.a_opt_ms)},
                         {"b_optimizer_ms", num(r.b_opt_ms)},
                         {"check", r.check()},
                         {"mismatches", r.mismatches},
                         {"regressions", r.regressions},
                         {"improvements", r.improvements}});
  j["only_a"] = c.only_a_keys;
  j["only_b"] = c.only_b_keys;
  j["mismatches"] = c.mismatches();
  j["regressions"] = c.regressions();
  j["ok"] = c.ok();
  fmt::print("{}\n", j.dump(2));
}

int compare(int argc, char** argv) {
  CLI::App app{
      "dmuon_compare: compare two dmuon results files (deterministic quantities exactly, median "
      "timings within a tolerance); exit 3 on a mismatch or regression"};
  std::string pa, pb;
  double tolerance = 0.10;
  bool json = false;
  app.add_option("A", pa, "baseline results file (HDF5)")->required();
  app.add_option("B", pb, "results file to check against A")->required();
  app.add_option("--time-tolerance", tolerance,
                 "allowed slowdown of B's median timings as a fraction (0.1 = 10 %)")
      ->capture_default_str();
  app.add_flag("--json", json, "print one JSON object instead of the table");
  app.parse(argc, argv);
  const auto a = results::read_results(pa);
  const auto b = results::read_results(pb);
  const auto c = results::compare_results(a, b, tolerance);
  if (json)
    print_json(pa, pb, c);
  else
    print_table(pa, a, pb, b, c);
  return c.ok() ? apps::kOk : apps::kCheckFailed;
}

}  // namespace

int main(int argc, char** argv) {
  return dmuon::apps::run_main("dmuon_compare", [&] { return compare(argc, argv); });
}
