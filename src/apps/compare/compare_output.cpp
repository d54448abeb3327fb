#include "compare/compare_output.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "dmuon/base/abbreviate.hpp"

namespace dmuon::apps::compare {
namespace {

constexpr std::size_t kTableWidth = 160;

std::string ms(double v) {
  return std::isnan(v) ? "-" : fmt::format("{:.2f}", v);
}

// "median (min-max)" of one side of a timing test, or "-".
std::string spread(double med, double lo, double hi) {
  if (std::isnan(med)) return "-";
  return fmt::format("{:.2f} ({:.1f}-{:.1f})", med, lo, hi);
}

std::string pct(double change) {
  return std::isnan(change) ? "-" : fmt::format("{:+.1f}", 100.0 * change);
}

// The minimum detectable effect in %, or "n<k" when the samples cannot reach alpha at all.
std::string mde(const results::TimingTest& t) {
  const auto& d = t.detectable;
  if (t.n_a == 0 || t.n_b == 0 || d.samples_needed == 0) return "-";
  if (!d.reachable) return fmt::format("n<{}", d.samples_needed);
  return std::isnan(d.relative) ? "-" : fmt::format("{:.1f}", 100.0 * d.relative);
}

// The p-value of the direction that moved, with a mark: '*' significant at alpha.
std::string pval(const results::TimingTest& t, double alpha) {
  if (!t.testable) return t.verdict == "non-finite" ? "nonfin" : "n/a";
  const double p = t.change >= 0 ? t.p_slower : t.p_faster;
  return fmt::format("{:.1e}{}", p, p < alpha ? "*" : " ");
}

nlohmann::json num(double v) {
  return std::isnan(v) ? nlohmann::json() : nlohmann::json(v);
}

const results::TimingTest* find_test(const results::RunComparison& r, const char* metric) {
  for (const auto& t : r.timings)
    if (t.metric == metric) return &t;
  return nullptr;
}

// Key fields equal across every listed run (printed once) and, per run, the rest.
struct KeyParts {
  std::vector<std::pair<std::string, std::string>> common;
  std::vector<std::string> per_run;  // indexed like the runs passed in
};

KeyParts split_keys(const std::vector<const results::RunRecord*>& runs) {
  KeyParts k;
  if (runs.empty()) return k;
  std::vector<std::vector<std::pair<std::string, std::string>>> fields;
  for (const auto* r : runs) fields.push_back(results::run_key_fields(*r));
  std::vector<bool> same(fields[0].size(), true);
  for (const auto& f : fields)
    for (std::size_t i = 0; i < f.size(); ++i) same[i] = same[i] && f[i] == fields[0][i];
  for (std::size_t i = 0; i < same.size(); ++i)
    if (same[i]) k.common.push_back(fields[0][i]);
  // Per run: boundary, method and owner strategy by value (they are what rows differ in),
  // anything else as name=value.
  for (const auto& f : fields) {
    std::string s;
    for (std::size_t i = 0; i < f.size(); ++i) {
      if (same[i]) continue;
      const bool bare =
          f[i].first == "boundary" || f[i].first == "method" || f[i].first == "owners";
      s += (s.empty() ? "" : " ") + (bare ? f[i].second : f[i].first + "=" + f[i].second);
    }
    k.per_run.push_back(s.empty() ? "(the key above)" : s);
  }
  return k;
}

std::string clip(const std::string& s, std::size_t n, bool wide) {
  if (wide || s.size() <= n) return s;
  return n < 4 ? s.substr(0, n) : s.substr(0, n - 3) + "...";
}

// A '#' comment wrapped to the table width (continuation lines "#   ").
void comment(const std::string& text, bool wide) {
  if (wide || text.size() <= kTableWidth) {
    fmt::print("{}\n", text);
    return;
  }
  std::string cur;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t next = text.find(' ', pos);
    if (next == std::string::npos) next = text.size();
    const std::string word = text.substr(pos, next - pos);
    if (!cur.empty() && cur.size() + 1 + word.size() > kTableWidth) {
      fmt::print("{}\n", cur);
      cur = "#   " + word;
    } else {
      cur += (cur.empty() ? "" : " ") + word;
    }
    pos = next + 1;
  }
  if (!cur.empty()) fmt::print("{}\n", cur);
}

// One "# A: file (...)" line per input file.
void print_files(const std::vector<std::string>& pas, const std::vector<results::ResultsFile>& fa,
                 const std::vector<std::string>& pbs, const std::vector<results::ResultsFile>& fb,
                 bool wide) {
  auto head = [wide](const std::string& tag, const std::string& p, const results::ResultsFile& f) {
    const auto& v = f.provenance;
    comment(fmt::format("# {}: {}  ({} runs; suite {}, commit {:.12}, {}, world {}, {}{})", tag, p,
                        f.runs.size(), v.suite_version, v.git_commit, v.build_type, v.world_size,
                        v.date_utc,
                        v.device_model.empty()
                            ? std::string()
                            : fmt::format("; {}, BLAS {}, sgemm {:.1f} GFLOP/s", v.device_model,
                                          v.blas_core.empty() ? "?" : v.blas_core, v.sgemm_gflops)),
            wide);
  };
  for (std::size_t k = 0; k < pas.size(); ++k)
    head(k == 0 ? "A" : fmt::format("A{}", k + 1), pas[k], fa[k]);
  for (std::size_t k = 0; k < pbs.size(); ++k)
    head(k == 0 ? "B" : fmt::format("B{}", k + 1), pbs[k], fb[k]);
}

// What the comparison tested and how, and its file-level notes.
void print_rules(const results::ResultsFile& a, const results::ResultsFile& b, std::size_t a_files,
                 std::size_t b_files, const results::Comparison& c, bool wide) {
  const auto& o = c.options;
  const std::string& ta = a.provenance.transport_settings;
  const std::string& tb = b.provenance.transport_settings;
  if (!o.deterministic_only && ta != tb)
    comment(fmt::format("# note: A and B ran on different transport settings, so their timings "
                        "compare the transports too (A: {}; B: {})",
                        ta.empty() ? "none set" : ta, tb.empty() ? "none set" : tb),
            wide);
  if (o.deterministic_only)
    comment(
        "# deterministic only: hooks, sites, owners, loads, calls, bytes, audit and check "
        "must match exactly; timings are not compared",
        wide);
  else
    comment(fmt::format(
                "# timings per sample (one measured step of one repeat, slowest rank): B is SLOWER "
                "when a one-sided Mann-Whitney U test gives p < {} AND B's median exceeds A's by "
                "more than the tolerance {:.1f} %; deterministic quantities must match exactly",
                o.alpha, 100.0 * o.tolerance),
            wide);
  if (!o.deterministic_only)
    comment(fmt::format("# mde %: the smallest slowdown the U test could flag with these samples "
                        "(B's samples moved onto A's median, then shifted until p < {}; the "
                        "gate also needs the tolerance); n<k: too few samples to reach "
                        "significance at all, k per side needed",
                        o.alpha),
            wide);
  if (!o.deterministic_only && (a_files > 1 || b_files > 1))
    comment(fmt::format("# {} vs {} invocations: a regression must also put B's median invocation "
                        "above A's slowest invocation by more than the tolerance",
                        a_files, b_files),
            wide);
  for (const auto& n : c.notes) comment("# note: " + n, wide);
}

// The run table: a row per matched run (with its '#' lines), then the missing and new runs.
void print_rows(const results::ResultsFile& a, const results::ResultsFile& b,
                const results::Comparison& c, bool wide) {
  const auto& o = c.options;
  std::vector<const results::RunRecord*> keyed;
  for (const auto& r : c.runs) keyed.push_back(&a.runs[r.a]);
  for (auto i : c.only_a) keyed.push_back(&a.runs[i]);
  for (auto j : c.only_b) keyed.push_back(&b.runs[j]);
  const auto keys = split_keys(keyed);
  std::string common;
  for (const auto& [k, v] : keys.common) common += (common.empty() ? "" : " ") + k + "=" + v;
  if (!common.empty()) comment("# key of every run: " + common, wide);
  fmt::print("# ms: median (min-max) over samples; p: one-sided U test, * = significant\n#\n");
  const std::string row =
      "  {:>3} {:>3}  {:<10} {:>22} {:>22} {:>7} {:>8} {:>5} {:>8} {:>8} {:>7} {:>8} {:>5}  {}\n";
  const std::size_t fixed = 2 + 4 + 4 + 12 + 23 + 23 + 8 + 9 + 6 + 9 + 9 + 8 + 9 + 6 + 1;
  const std::size_t label_width = kTableWidth > fixed ? kTableWidth - fixed : 20;
  fmt::print(
      "# {:>3} {:>3}  {:<10} {:>22} {:>22} {:>7} {:>8} {:>5} {:>8} {:>8} {:>7} {:>8} {:>5}  {}\n",
      "A", "B", "check", "A step ms", "B step ms", "chg %", "p", "mde %", "A opt ms", "B opt ms",
      "chg %", "p", "mde %", "run");
  std::size_t k = 0;
  for (const auto& r : c.runs) {
    const auto* st = find_test(r, "step_ms");
    const auto* ot = find_test(r, "optimizer_ms");
    const bool measured = r.status == "ok";
    fmt::print(row, r.a, r.b, r.check(),
               st ? spread(st->a_median, st->a_min, st->a_max) : (measured ? ms(r.a_step_ms) : "-"),
               st ? spread(st->b_median, st->b_min, st->b_max) : (measured ? ms(r.b_step_ms) : "-"),
               st ? pct(st->change) : "-", st ? pval(*st, o.alpha) : "-", st ? mde(*st) : "-",
               ot ? ms(ot->a_median) : (measured ? ms(r.a_opt_ms) : "-"),
               ot ? ms(ot->b_median) : (measured ? ms(r.b_opt_ms) : "-"),
               ot ? pct(ot->change) : "-", ot ? pval(*ot, o.alpha) : "-", ot ? mde(*ot) : "-",
               clip((r.status == "ok" ? "" : r.status + " ") + keys.per_run[k], label_width, wide));
    ++k;
    for (const auto& m : r.mismatches) comment("#     mismatch: " + m, wide);
    for (const auto& m : r.regressions) comment("#     regression: " + m, wide);
    for (const auto& m : r.improvements) comment("#     improvement: " + m, wide);
    for (const auto& m : r.unreliable) comment("#     unreliable: " + m, wide);
    for (const auto& m : r.notes) comment("#     note: " + m, wide);
  }
  for (std::size_t n = 0; n < c.only_a.size(); ++n) {
    fmt::print(row, c.only_a[n], "-", "MISSING", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-",
               clip(keys.per_run[k++], label_width, wide));
    if (!c.only_a_nearest[n].empty())
      comment("#     mismatch: the nearest run only in B differs in " + c.only_a_nearest[n], wide);
  }
  for (auto j : c.only_b)
    fmt::print(row, "-", j, "NEW", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-",
               clip(keys.per_run[k++], label_width, wide));
  for (const auto& e : c.extra_runs) comment("# mismatch: " + e, wide);
}

// The counts and the verdict.
void print_totals(const results::Comparison& c, bool wide) {
  const auto& o = c.options;
  fmt::print("#\n# matched runs: {}   only in A: {}   only in B: {}\n", c.runs.size(),
             c.only_a.size(), c.only_b.size());
  fmt::print("# deterministic mismatches: {}\n", c.mismatches());
  if (o.deterministic_only) {
    fmt::print("# regressions: not tested (--deterministic-only)\n");
  } else if (c.timings_skipped) {
    fmt::print("# regressions: not tested (different machines; --any-machine to compare)\n");
  } else {
    fmt::print("# regressions: {}\n", c.regressions());
    if (c.untested() > 0)
      fmt::print(
          "# untested timings: {} runs (too few samples for p < {}: raise --steps or "
          "--repeats)\n",
          c.untested(), o.alpha);
    if (c.unreliable() > 0)
      comment(fmt::format("# unreliable timings: {} runs (not failures): {}", c.unreliable(),
                          results::describe(c.probe)),
              wide);
  }
  fmt::print("# {}\n", c.ok() ? "OK" : "FAILED");
}

nlohmann::json timing_json(const results::TimingTest& t) {
  return {{"metric", t.metric},
          {"samples_a", t.n_a},
          {"samples_b", t.n_b},
          {"a_median_ms", num(t.a_median)},
          {"a_min_ms", num(t.a_min)},
          {"a_max_ms", num(t.a_max)},
          {"b_median_ms", num(t.b_median)},
          {"b_min_ms", num(t.b_min)},
          {"b_max_ms", num(t.b_max)},
          {"a_invocation_medians_ms", t.a_invocations},
          {"b_invocation_medians_ms", t.b_invocations},
          {"invocation_change", num(t.invocation_change)},
          {"change", num(t.change)},
          {"p_slower", num(t.p_slower)},
          {"p_faster", num(t.p_faster)},
          {"testable", t.testable},
          {"mde", t.detectable.reachable ? num(t.detectable.relative) : nlohmann::json()},
          {"mde_shift_ms", t.detectable.reachable ? num(t.detectable.shift) : nlohmann::json()},
          {"samples_needed_per_side", t.detectable.samples_needed},
          {"verdict", t.verdict},
          {"unreliable_verdict", t.unreliable_verdict}};
}

}  // namespace

void print_table(const std::vector<std::string>& pas, const std::vector<results::ResultsFile>& fa,
                 const std::vector<std::string>& pbs, const std::vector<results::ResultsFile>& fb,
                 const results::Comparison& c, bool wide) {
  fmt::print("# dmuon_compare\n");
  print_files(pas, fa, pbs, fb, wide);
  print_rules(fa.front(), fb.front(), pas.size(), pbs.size(), c, wide);
  print_rows(fa.front(), fb.front(), c, wide);
  print_totals(c, wide);
}

void print_json(const std::vector<std::string>& pas, const std::vector<std::string>& pbs,
                const results::Comparison& c) {
  nlohmann::json j;
  j["a"] = pas.front();
  j["b"] = pbs.front();
  j["a_files"] = pas;
  j["b_files"] = pbs;
  j["time_tolerance"] = c.options.tolerance;
  j["alpha"] = c.options.alpha;
  j["deterministic_only"] = c.options.deterministic_only;
  j["timings_compared"] = !c.options.deterministic_only && !c.timings_skipped;
  j["notes"] = c.notes;
  j["runs"] = nlohmann::json::array();
  for (const auto& r : c.runs) {
    auto t = nlohmann::json::array();
    for (const auto& x : r.timings) t.push_back(timing_json(x));
    j["runs"].push_back({{"a", r.a},
                         {"b", r.b},
                         {"key", r.key},
                         {"status", r.status},
                         {"a_step_ms", num(r.a_step_ms)},
                         {"b_step_ms", num(r.b_step_ms)},
                         {"a_optimizer_ms", num(r.a_opt_ms)},
                         {"b_optimizer_ms", num(r.b_opt_ms)},
                         {"timings", t},
                         {"check", r.check()},
                         {"mismatches", r.mismatches},
                         {"regressions", r.regressions},
                         {"improvements", r.improvements},
                         {"unreliable", r.unreliable},
                         {"notes", r.notes}});
  }
  j["only_a"] = c.only_a_keys;
  j["only_a_nearest"] = c.only_a_nearest;
  j["only_b"] = c.only_b_keys;
  j["extra_runs"] = c.extra_runs;
  j["mismatches"] = c.mismatches();
  j["regressions"] = c.regressions();
  j["untested"] = c.untested();
  j["unreliable"] = c.unreliable();
  const auto& p = c.probe;
  j["machine_probe"] = {{"a_sgemm_gflops", p.measured() ? nlohmann::json(p.a_gflops) : nullptr},
                        {"b_sgemm_gflops", p.measured() ? nlohmann::json(p.b_gflops) : nullptr},
                        {"ratio", num(p.ratio())},
                        {"threshold", p.threshold},
                        {"disagree", p.disagree()}};
  j["ok"] = c.ok();
  fmt::print("{}\n", j.dump(2));
}

}  // namespace dmuon::apps::compare
