#include "dmuon/results/compare.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "dmuon/base/error.hpp"
#include "dmuon/results/mann_whitney.hpp"
#include "dmuon/results/summary.hpp"

namespace dmuon::results {
namespace {

constexpr std::size_t kMaxLinesPerCategory = 5;

// Collects difference lines per category, keeping at most a few of each.
class Diffs {
 public:
  explicit Diffs(std::vector<std::string>& out) : out_(out) {}
  void add(const std::string& category, const std::string& line) {
    auto& n = count_[category];
    if (n++ < kMaxLinesPerCategory) out_.push_back(line);
  }
  ~Diffs() {
    for (const auto& [cat, n] : count_)
      if (n > kMaxLinesPerCategory)
        out_.push_back(
            fmt::format("{}: ... and {} more differences", cat, n - kMaxLinesPerCategory));
  }

 private:
  std::vector<std::string>& out_;
  std::map<std::string, std::size_t> count_;
};

std::string site_name(const std::string& p) {
  return p.empty() ? "<root>" : p;
}

void compare_partition(const RunRecord& a, const RunRecord& b, Diffs& d);
void compare_verdicts(const RunRecord& a, const RunRecord& b, Diffs& d,
                      std::vector<std::string>& notes);

void compare_deterministic(const RunRecord& a, const RunRecord& b, std::vector<std::string>& out,
                           std::vector<std::string>& notes) {
  Diffs d(out);
  if (a.status != b.status) {
    d.add("status", fmt::format("status: A {} vs B {}{}", a.status, b.status,
                                b.error.empty() ? "" : " (" + b.error + ")"));
    return;
  }
  if (a.status != "ok") return;  // rejected in both: nothing ran

  // Hook sites.
  if (a.sites.path.size() != b.sites.path.size())
    d.add("hook sites",
          fmt::format("hook sites: A {} vs B {}", a.sites.path.size(), b.sites.path.size()));
  const std::size_t ns = std::min(a.sites.path.size(), b.sites.path.size());
  for (std::size_t i = 0; i < ns; ++i) {
    if (a.sites.path[i] != b.sites.path[i])
      d.add("site paths", fmt::format("site {} path: A {} vs B {}", i, site_name(a.sites.path[i]),
                                      site_name(b.sites.path[i])));
    else if (a.sites.owners[i] != b.sites.owners[i])
      d.add("site owners",
            fmt::format("site {} ({}) owners: A [{}] vs B [{}]", i, site_name(a.sites.path[i]),
                        fmt::join(a.sites.owners[i], ","), fmt::join(b.sites.owners[i], ",")));
  }
  for (const char* key : {"hook_calls_per_step", "hook_sites"}) {
    const auto ia = a.summary.find(key), ib = b.summary.find(key);
    if (ia != a.summary.end() && ib != b.summary.end() && ia->second != ib->second)
      d.add(key, fmt::format("{}: A {} vs B {}", key, ia->second, ib->second));
  }

  // Owners per parameter, by name.
  std::map<std::string, std::int64_t> owner_b;
  for (std::size_t i = 0; i < b.params.name.size(); ++i)
    if (b.params.dedicated[i]) owner_b[b.params.name[i]] = b.params.owner_rank[i];
  std::size_t ded_a = 0;
  for (std::size_t i = 0; i < a.params.name.size(); ++i) {
    if (!a.params.dedicated[i]) continue;
    ++ded_a;
    const auto it = owner_b.find(a.params.name[i]);
    if (it == owner_b.end())
      d.add("owners", fmt::format("parameter {}: dedicated in A, not in B", a.params.name[i]));
    else if (it->second != a.params.owner_rank[i])
      d.add("owners", fmt::format("owner of {}: A rank {} vs B rank {}", a.params.name[i],
                                  a.params.owner_rank[i], it->second));
  }
  if (owner_b.size() > ded_a)
    d.add("owners", fmt::format("dedicated parameters: A {} vs B {}", ded_a, owner_b.size()));

  // Collectives, aligned by kind name.
  const auto& ca = a.collectives;
  const auto& cb = b.collectives;
  if (ca.ranks != cb.ranks)
    d.add("collectives", fmt::format("collective ranks: A {} vs B {}", ca.ranks, cb.ranks));
  for (std::size_t ka = 0; ka < ca.kinds.size(); ++ka) {
    std::size_t kb = 0;
    while (kb < cb.kinds.size() && cb.kinds[kb] != ca.kinds[ka]) ++kb;
    if (kb == cb.kinds.size()) {
      d.add("collectives", fmt::format("collective {}: only in A", ca.kinds[ka]));
      continue;
    }
    if (ca.ranks != cb.ranks) continue;
    struct Col {
      const char* what;
      const std::vector<std::int64_t>& va;
      const std::vector<std::int64_t>& vb;
    };
    for (const Col& c : {Col{"calls/step", ca.calls_per_step, cb.calls_per_step},
                         Col{"bytes/step", ca.bytes_per_rank_per_step, cb.bytes_per_rank_per_step},
                         Col{"formula bytes/step", ca.formula_bytes_per_rank_per_step,
                             cb.formula_bytes_per_rank_per_step}})
      for (std::int64_t r = 0; r < ca.ranks; ++r) {
        const auto x = c.va[ka * static_cast<std::size_t>(ca.ranks) + static_cast<std::size_t>(r)];
        const auto y = c.vb[kb * static_cast<std::size_t>(cb.ranks) + static_cast<std::size_t>(r)];
        if (x != y)
          d.add(std::string("collective ") + c.what,
                fmt::format("{} {} rank {}: A {} vs B {}", ca.kinds[ka], c.what, r, x, y));
      }
  }
  for (const auto& k : cb.kinds)
    if (std::find(ca.kinds.begin(), ca.kinds.end(), k) == ca.kinds.end())
      d.add("collectives", fmt::format("collective {}: only in B", k));
  compare_partition(a, b, d);
  compare_verdicts(a, b, d, notes);
}

// First non-finite or negative timing of a run, as a message; "" when all are fine.
std::string bad_timing(const char* which, const RunRecord& r) {
  const auto& t = r.timings;
  const auto bad = [](double x) { return !std::isfinite(x) || x < 0; };
  const std::size_t np = t.phases.size();
  for (std::size_t i = 0; i < t.seconds.size(); ++i)
    if (bad(t.seconds[i])) {
      const std::size_t per_step = static_cast<std::size_t>(std::max<std::int64_t>(t.ranks, 1)) *
                                   std::max<std::size_t>(np, 1);
      return fmt::format("non-finite timing in {}: sample {} rank {} phase {} = {} s", which,
                         i / per_step, (i % per_step) / std::max<std::size_t>(np, 1),
                         np ? t.phases[i % np] : "?", t.seconds[i]);
    }
  for (std::size_t i = 0; i < t.step_seconds.size(); ++i)
    if (bad(t.step_seconds[i])) {
      const auto ranks = static_cast<std::size_t>(std::max<std::int64_t>(t.ranks, 1));
      return fmt::format("non-finite timing in {}: sample {} rank {} step = {} s", which, i / ranks,
                         i % ranks, t.step_seconds[i]);
    }
  for (const char* k : {"step_ms", "optimizer_ms"}) {
    const auto it = r.summary.find(k);
    if (it != r.summary.end() && bad(it->second))
      return fmt::format("non-finite timing in {}: summary {} = {}", which, k, it->second);
  }
  return "";
}

double vmin(const std::vector<double>& v) {
  return v.empty() ? std::nan("") : *std::min_element(v.begin(), v.end());
}
double vmax(const std::vector<double>& v) {
  return v.empty() ? std::nan("") : *std::max_element(v.begin(), v.end());
}
std::vector<double> to_ms(std::vector<double> v) {
  for (double& x : v) x *= 1e3;
  return v;
}

TimingTest test_timing(const char* metric, const std::vector<double>& a,
                       const std::vector<double>& b, const CompareOptions& o, RunComparison& rc) {
  TimingTest t;
  t.metric = metric;
  t.n_a = a.size();
  t.n_b = b.size();
  t.a_median = median(a);
  t.b_median = median(b);
  t.a_min = vmin(a);
  t.a_max = vmax(a);
  t.b_min = vmin(b);
  t.b_max = vmax(b);
  t.change = t.a_median > 0 ? (t.b_median - t.a_median) / t.a_median : std::nan("");
  if (a.empty() || b.empty()) {
    rc.notes.push_back(fmt::format("{}: no samples in {} (not tested)", metric,
                                   a.empty() ? (b.empty() ? "A and B" : "A") : "B"));
    return t;
  }
  const double min_p = min_one_sided_p(a.size(), b.size());
  if (!(min_p < o.alpha)) return t;  // untested: compare_timings says so once per run
  t.testable = true;
  const auto u = mann_whitney_u(a, b);
  t.p_slower = u.p_greater;
  t.p_faster = u.p_less;
  const std::string stats = fmt::format(
      "A median {:.4f} ms [{:.4f}, {:.4f}], B median {:.4f} ms [{:.4f}, {:.4f}], {:+.1f} %, "
      "{} vs {} samples",
      t.a_median, t.a_min, t.a_max, t.b_median, t.b_min, t.b_max, 100.0 * t.change, t.n_a, t.n_b);
  if (t.p_slower < o.alpha && t.change > o.tolerance) {
    t.verdict = "slower";
    rc.regressions.push_back(
        fmt::format("{}: {}; U test p = {:.2g} < {} and the change exceeds "
                    "the tolerance {:.1f} %",
                    metric, stats, t.p_slower, o.alpha, 100.0 * o.tolerance));
  } else if (t.p_faster < o.alpha && t.change < -o.tolerance) {
    t.verdict = "faster";
    rc.improvements.push_back(fmt::format("{}: {}; U test p = {:.2g}", metric, stats, t.p_faster));
  } else {
    t.verdict = "same";
  }
  return t;
}

void compare_timings(const RunRecord& ra, const RunRecord& rb, const CompareOptions& o,
                     RunComparison& rc) {
  bool finite = true;
  for (const auto& [which, r] : {std::pair<const char*, const RunRecord*>{"A", &ra}, {"B", &rb}}) {
    const auto msg = bad_timing(which, *r);
    if (!msg.empty()) {
      rc.regressions.push_back(msg);
      finite = false;
    }
  }
  auto step_a = to_ms(step_samples(ra.timings)), step_b = to_ms(step_samples(rb.timings));
  auto opt_a = to_ms(phase_samples(ra.timings, "optimizer"));
  auto opt_b = to_ms(phase_samples(rb.timings, "optimizer"));
  if (!finite) {
    TimingTest t;
    t.metric = "step_ms";
    t.verdict = "non-finite";
    rc.timings.push_back(t);
    return;
  }
  rc.timings.push_back(test_timing("step_ms", step_a, step_b, o, rc));
  if (!opt_a.empty() || !opt_b.empty())
    rc.timings.push_back(test_timing("optimizer_ms", opt_a, opt_b, o, rc));
  if (!step_a.empty() && !step_b.empty() && !rc.timings.front().testable)
    rc.notes.push_back(fmt::format(
        "timings untested: {} vs {} samples cannot reach p < {} (smallest p {:.3g}; step median "
        "{:+.1f} %); run dmuon_bench with more --steps or --repeats",
        step_a.size(), step_b.size(), o.alpha, min_one_sided_p(step_a.size(), step_b.size()),
        100.0 * rc.timings.front().change));
}

void compare_partition(const RunRecord& a, const RunRecord& b, Diffs& d) {
  const auto& p = a.partition;
  const auto& q = b.partition;
  if (p.numel_loads != q.numel_loads)
    d.add("loads", fmt::format("partition numel loads: A [{}] vs B [{}]",
                               fmt::join(p.numel_loads, ","), fmt::join(q.numel_loads, ",")));
  if (p.cost_loads != q.cost_loads)
    d.add("loads", fmt::format("partition cost loads: A [{}] vs B [{}]",
                               fmt::join(p.cost_loads, ","), fmt::join(q.cost_loads, ",")));
  if (p.makespan != q.makespan)
    d.add("loads", fmt::format("partition makespan: A {} vs B {}", p.makespan, q.makespan));
}

void compare_verdicts(const RunRecord& a, const RunRecord& b, Diffs& d,
                      std::vector<std::string>& notes) {
  const auto text = [](const RunRecord& r, const char* k) {
    const auto it = r.summary_text.find(k);
    return it == r.summary_text.end() ? std::string() : it->second;
  };
  const auto num = [](const RunRecord& r, const char* k) {
    const auto it = r.summary.find(k);
    return it == r.summary.end() ? std::nan("") : it->second;
  };
  const double audit_a = num(a, "audit_ok"), audit_b = num(b, "audit_ok");
  if (!std::isnan(audit_a) && !std::isnan(audit_b) && audit_a != audit_b)
    d.add("audit", fmt::format("byte audit: A {} vs B {}", audit_a != 0 ? "ok" : text(a, "audit"),
                               audit_b != 0 ? "ok" : text(b, "audit")));
  const std::string ca = text(a, "check"), cb = text(b, "check");
  const bool ran_a = ca == "passed" || ca == "failed", ran_b = cb == "passed" || cb == "failed";
  if (ran_a && ran_b && ca != cb)
    d.add("check", fmt::format("--check: A {} vs B {}", ca, cb));
  else if (ran_a != ran_b)
    notes.push_back(fmt::format("--check ran in {} only (A: {}, B: {})", ran_a ? "A" : "B",
                                ca.empty() ? "-" : ca, cb.empty() ? "-" : cb));
}

}  // namespace

std::vector<std::pair<std::string, std::string>> run_key_fields(const RunRecord& r) {
  const auto dash = [](const std::string& v) { return v.empty() ? std::string("-") : v; };
  const auto num = [](std::int64_t v, std::int64_t unknown) {
    return v == unknown ? std::string("?") : std::to_string(v);
  };
  return {{"topology", r.topology},
          {"preset", dash(r.preset)},
          {"set", dash(r.sets)},
          {"dedicate", dash(r.dedicate_rule)},
          {"boundary", r.boundary_spec.empty() ? "-"
                                               : fmt::format("{} ({})", r.boundary_spec,
                                                             r.strict ? "strict" : "lenient")},
          {"method", r.method},
          {"owners", dash(r.partition.strategy)},
          {"cost", dash(r.partition.cost_model)},
          {"plan", dash(r.plan_options)},
          {"reshard", r.reshard},
          {"grad_reduce", r.grad_reduce},
          {"prefetch", std::to_string(r.prefetch)},
          {"device", r.device},
          {"comm", r.comm_dtype},
          {"ns", r.ns + "/" + r.ns_dtype},
          {"pipeline", r.optimizer_pipeline},
          {"clip", r.clip_norm},
          {"accum", std::to_string(r.accum)},
          {"compute", r.compute},
          {"batch", num(r.global_samples, 0)},
          {"steps", num(r.steps, 0)},
          {"warmup", num(r.warmup, -1)},
          {"seed", num(r.seed, -1)},
          {"world", std::to_string(r.world_size)},
          {"R", std::to_string(r.replicate)},
          {"T", std::to_string(r.tp)}};
}

std::string run_key(const RunRecord& r) {
  std::string s;
  for (const auto& [k, v] : run_key_fields(r)) s += (s.empty() ? "" : " ") + k + "=" + v;
  return s;
}

std::string RunComparison::check() const {
  if (!mismatches.empty()) return "MISMATCH";
  if (!regressions.empty()) return "SLOWER";
  if (!improvements.empty()) return "FASTER";
  if (untested()) return "UNTESTED";
  return "OK";
}

bool RunComparison::untested() const {
  for (const auto& t : timings)
    if (!t.testable && t.verdict == "untested") return true;
  return false;
}

int Comparison::mismatches() const {
  int n = static_cast<int>(only_a.size());
  for (const auto& r : runs) n += r.mismatches.empty() ? 0 : 1;
  return n;
}

int Comparison::regressions() const {
  int n = 0;
  for (const auto& r : runs) n += r.regressions.empty() ? 0 : 1;
  return n;
}

int Comparison::untested() const {
  int n = 0;
  for (const auto& r : runs) n += r.untested() ? 1 : 0;
  return n;
}

namespace {

// Remarks on the two invocations: timings from different machines or BLAS kernels are not
// comparable, and the gate should say so next to its verdict.
void compare_provenance(const Provenance& a, const Provenance& b, std::vector<std::string>& out) {
  // The sgemm at start is only noted: on a shared machine it varies as much as the timings
  // (measured: 20 vs 9 GFLOP/s per rank for two back-to-back 8-rank runs), too noisy to
  // calibrate them with.
  if (a.sgemm_gflops > 0 && b.sgemm_gflops > 0) {
    const double r = b.sgemm_gflops / a.sgemm_gflops;
    if (r < 0.8 || r > 1.25)
      out.push_back(
          fmt::format("sgemm measured at the start: A {:.1f}, B {:.1f} GFLOP/s per rank "
                      "({:+.0f} %): the machine was busier in one of the runs",
                      a.sgemm_gflops, b.sgemm_gflops, 100.0 * (r - 1)));
  }
  const auto join = [](const std::vector<std::string>& v) {
    return fmt::format("{}", fmt::join(v, ","));
  };
  if (a.hostnames != b.hostnames)
    out.push_back(fmt::format("A ran on hosts {}, B on {}", join(a.hostnames), join(b.hostnames)));
}

// Why two invocations ran on different kinds of machine ("" when they did not, or when a file
// predates the hardware provenance): CPU or GPU model, BLAS kernels, device.
std::string different_machines(const Provenance& a, const Provenance& b, double tolerance) {
  if (a.device_model.empty() || b.device_model.empty()) return "";
  if (a.device != b.device) return fmt::format("A ran on {}, B on {}", a.device, b.device);
  if (a.device_model != b.device_model)
    return fmt::format("A ran on {}, B on {}", a.device_model, b.device_model);
  if (a.blas_core != b.blas_core)
    return fmt::format("A's BLAS ran {} kernels, B's {}", a.blas_core, b.blas_core);
  (void)tolerance;
  return "";
}

}  // namespace

Comparison compare_results(const ResultsFile& a, const ResultsFile& b, double tolerance) {
  CompareOptions o;
  o.tolerance = tolerance;
  return compare_results(a, b, o);
}

Comparison compare_results(const ResultsFile& a, const ResultsFile& b, const CompareOptions& o) {
  if (!(o.tolerance >= 0) || std::isinf(o.tolerance))
    throw InputError(fmt::format("time tolerance {} is invalid (valid: a fraction >= 0, e.g. 0.1)",
                                 o.tolerance));
  if (!(o.alpha > 0 && o.alpha < 1))
    throw InputError(fmt::format(
        "alpha {} is invalid (valid: a significance level in (0, 1), e.g. 0.05)", o.alpha));
  Comparison c;
  c.options = o;
  CompareOptions run_options = o;
  if (!o.deterministic_only) {
    compare_provenance(a.provenance, b.provenance, c.notes);
    const std::string why = different_machines(a.provenance, b.provenance, o.tolerance);
    if (!why.empty() && !o.any_machine) {
      c.notes.push_back(
          fmt::format("timings not compared: {} (timings of different machines or "
                      "machine states say nothing about the code; --any-machine "
                      "compares them anyway)",
                      why));
      c.timings_skipped = true;
      run_options.deterministic_only = true;
    }
  }
  std::vector<bool> used(b.runs.size(), false);
  std::vector<std::string> keys_b;
  for (const auto& r : b.runs) keys_b.push_back(run_key(r));
  for (std::size_t i = 0; i < a.runs.size(); ++i) {
    const std::string key = run_key(a.runs[i]);
    std::size_t j = 0;
    while (j < b.runs.size() && (used[j] || keys_b[j] != key)) ++j;
    if (j == b.runs.size()) {
      c.only_a.push_back(i);
      c.only_a_keys.push_back(key);
      continue;
    }
    used[j] = true;
    RunComparison rc;
    rc.a = i;
    rc.b = j;
    rc.key = key;
    const auto& ra = a.runs[i];
    const auto& rb = b.runs[j];
    rc.status = ra.status;
    rc.a_step_ms = run_step_ms(ra);
    rc.b_step_ms = run_step_ms(rb);
    rc.a_opt_ms = run_optimizer_ms(ra);
    rc.b_opt_ms = run_optimizer_ms(rb);
    compare_deterministic(ra, rb, rc.mismatches, rc.notes);
    if (ra.status == "ok" && rb.status == "ok" && !run_options.deterministic_only)
      compare_timings(ra, rb, run_options, rc);
    c.runs.push_back(std::move(rc));
  }
  for (std::size_t j = 0; j < b.runs.size(); ++j)
    if (!used[j]) {
      c.only_b.push_back(j);
      c.only_b_keys.push_back(keys_b[j]);
    }
  return c;
}

}  // namespace dmuon::results
