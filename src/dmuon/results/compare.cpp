#include "dmuon/results/compare.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "dmuon/base/error.hpp"
#include "dmuon/results/mann_whitney.hpp"
#include "dmuon/results/record_schema.hpp"
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

// Hook sites: their number, paths and owner lists, and the hook counts of the summary.
void compare_sites(const RunRecord& a, const RunRecord& b, Diffs& d) {
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
  for (const char* key : {summary_key::hook_calls_per_step.name, summary_key::hook_sites.name}) {
    const auto ia = a.summary.find(key), ib = b.summary.find(key);
    if (ia != a.summary.end() && ib != b.summary.end() && ia->second != ib->second)
      d.add(key, fmt::format("{}: A {} vs B {}", key, ia->second, ib->second));
  }
}

// The owner of every dedicated parameter, by name.
void compare_owners(const RunRecord& a, const RunRecord& b, Diffs& d) {
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
}

// Calls, measured and formula bytes per rank of channel ka of A and kb of B.
void compare_channel(const Collectives& ca, std::size_t ka, const Collectives& cb, std::size_t kb,
                     Diffs& d) {
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

// Collectives, aligned by channel name.
void compare_collectives(const Collectives& ca, const Collectives& cb, Diffs& d) {
  if (ca.ranks != cb.ranks)
    d.add("collectives", fmt::format("collective ranks: A {} vs B {}", ca.ranks, cb.ranks));
  for (std::size_t ka = 0; ka < ca.kinds.size(); ++ka) {
    std::size_t kb = 0;
    while (kb < cb.kinds.size() && cb.kinds[kb] != ca.kinds[ka]) ++kb;
    if (kb == cb.kinds.size()) {
      d.add("collectives", fmt::format("collective {}: only in A", ca.kinds[ka]));
      continue;
    }
    if (ca.ranks == cb.ranks) compare_channel(ca, ka, cb, kb, d);
  }
  for (const auto& k : cb.kinds)
    if (std::find(ca.kinds.begin(), ca.kinds.end(), k) == ca.kinds.end())
      d.add("collectives", fmt::format("collective {}: only in B", k));
}

void compare_deterministic(const RunRecord& a, const RunRecord& b, std::vector<std::string>& out,
                           std::vector<std::string>& notes) {
  Diffs d(out);
  if (a.status != b.status) {
    d.add("status", fmt::format("status: A {} vs B {}{}", a.status, b.status,
                                b.error.empty() ? "" : " (" + b.error + ")"));
    return;
  }
  if (a.status != "ok") return;  // rejected in both: nothing ran
  compare_sites(a, b, d);
  compare_owners(a, b, d);
  compare_collectives(a.collectives, b.collectives, d);
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
  for (const char* k : {summary_key::step_ms.name, summary_key::optimizer_ms.name}) {
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

std::vector<double> pooled(const std::vector<std::vector<double>>& invocations) {
  std::vector<double> v;
  for (const auto& x : invocations) v.insert(v.end(), x.begin(), x.end());
  return v;
}

std::vector<double> invocation_medians(const std::vector<std::vector<double>>& invocations) {
  std::vector<double> m;
  for (const auto& x : invocations) m.push_back(x.empty() ? std::nan("") : median(x));
  return m;
}

// Medians, ranges and change of each side's pooled samples, and each invocation's median.
TimingTest describe_samples(const char* metric, const std::vector<std::vector<double>>& a_runs,
                            const std::vector<std::vector<double>>& b_runs) {
  const auto a = pooled(a_runs), b = pooled(b_runs);
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
  t.a_invocations = invocation_medians(a_runs);
  t.b_invocations = invocation_medians(b_runs);
  return t;
}

// The samples as the verdict lines quote them.
std::string sample_stats(const TimingTest& t, bool several) {
  std::string stats = fmt::format(
      "A median {:.4f} ms [{:.4f}, {:.4f}], B median {:.4f} ms [{:.4f}, {:.4f}], {:+.1f} %, "
      "{} vs {} samples",
      t.a_median, t.a_min, t.a_max, t.b_median, t.b_min, t.b_max, 100.0 * t.change, t.n_a, t.n_b);
  if (several)
    stats += fmt::format(
        "; invocation medians A [{:.4f}], B [{:.4f}] ms: B's median invocation {:+.1f} % from A's "
        "{} one",
        fmt::join(t.a_invocations, ", "), fmt::join(t.b_invocations, ", "),
        100.0 * t.invocation_change, t.change >= 0 ? "slowest" : "fastest");
  return stats;
}

// Files what the samples `said` ("slower", "faster", "same") as the test's verdict and one line
// of `rc`, unless the machine probes make it unreliable. `slower`/`faster`: the samples alone
// (U test and tolerance) before the invocations were weighed.
void record_verdict(TimingTest& t, const std::string& said, bool slower, bool faster, bool several,
                    const CompareOptions& o, const ProbeAgreement& probe, RunComparison& rc) {
  const std::string& metric = t.metric;
  if (verdict_given_probes(said, probe) == "unreliable") {
    t.verdict = "unreliable";
    t.unreliable_verdict = said;
    const double p = t.change >= 0 ? t.p_slower : t.p_faster;
    rc.unreliable.push_back(fmt::format(
        "{}: the samples say {} ({:+.1f} %, p = {:.2g}{}) but the machine probes disagree (B/A "
        "{:.2f}): not read as the code's",
        metric, said, 100.0 * t.change, p,
        several ? fmt::format(", {:+.1f} % between invocations", 100.0 * t.invocation_change) : "",
        probe.ratio()));
  } else if (said == "slower") {
    t.verdict = "slower";
    rc.regressions.push_back(fmt::format(
        "{}: {}; U test p = {:.2g} < {} and the change exceeds the tolerance {:.1f} %{}", metric,
        sample_stats(t, several), t.p_slower, o.alpha, 100.0 * o.tolerance,
        several ? " between invocations too" : ""));
  } else if (said == "faster") {
    t.verdict = "faster";
    rc.improvements.push_back(
        fmt::format("{}: {}; U test p = {:.2g}", metric, sample_stats(t, several), t.p_faster));
  } else {
    t.verdict = "same";
    if (slower || faster)
      rc.notes.push_back(fmt::format(
          "{}: {} {:+.1f} % over the samples (p = {:.2g}) but {:+.1f} % between invocations, "
          "within the tolerance {:.1f} % of A's own spread: the machine, not the code",
          metric, slower ? "slower" : "faster", 100.0 * t.change, slower ? t.p_slower : t.p_faster,
          100.0 * t.invocation_change, 100.0 * o.tolerance));
  }
}

// One timing metric over the invocations of each side (the samples of one results file each).
TimingTest test_timing(const char* metric, const std::vector<std::vector<double>>& a_runs,
                       const std::vector<std::vector<double>>& b_runs, const CompareOptions& o,
                       const ProbeAgreement& probe, RunComparison& rc) {
  TimingTest t = describe_samples(metric, a_runs, b_runs);
  const auto a = pooled(a_runs), b = pooled(b_runs);
  if (a.empty() || b.empty()) {
    rc.notes.push_back(fmt::format("{}: no samples in {} (not tested)", metric,
                                   a.empty() ? (b.empty() ? "A and B" : "A") : "B"));
    return t;
  }
  // Between invocations: B's typical invocation against A's slowest (or fastest) one.
  const double b_typical = median(t.b_invocations);
  const double a_slowest = vmax(t.a_invocations), a_fastest = vmin(t.a_invocations);
  const double up = a_slowest > 0 ? b_typical / a_slowest - 1 : std::nan("");
  const double down = a_fastest > 0 ? b_typical / a_fastest - 1 : std::nan("");
  t.invocation_change = t.change >= 0 ? up : down;
  t.detectable = minimum_detectable_effect(a, b, o.alpha);
  const double min_p = min_one_sided_p(a.size(), b.size());
  if (!(min_p < o.alpha)) return t;  // untested: compare_timings says so once per run
  t.testable = true;
  const auto u = mann_whitney_u(a, b);
  t.p_slower = u.p_greater;
  t.p_faster = u.p_less;
  const bool slower = t.p_slower < o.alpha && t.change > o.tolerance;
  const bool faster = t.p_faster < o.alpha && t.change < -o.tolerance;
  const std::string said =
      slower && up > o.tolerance ? "slower" : (faster && down < -o.tolerance ? "faster" : "same");
  record_verdict(t, said, slower, faster, a_runs.size() > 1 || b_runs.size() > 1, o, probe, rc);
  return t;
}

// The timings of one matched run, over every invocation of each side.
void compare_timings(const std::vector<const RunRecord*>& ra,
                     const std::vector<const RunRecord*>& rb, const CompareOptions& o,
                     const ProbeAgreement& probe, RunComparison& rc) {
  bool finite = true;
  for (const auto& [which, side] :
       {std::pair<const char*, const std::vector<const RunRecord*>*>{"A", &ra}, {"B", &rb}})
    for (std::size_t k = 0; k < side->size(); ++k) {
      const std::string name = k == 0 ? which : fmt::format("{}{}", which, k + 1);
      const auto msg = bad_timing(name.c_str(), *(*side)[k]);
      if (!msg.empty()) {
        rc.regressions.push_back(msg);
        finite = false;
      }
    }
  if (!finite) {
    TimingTest t;
    t.metric = "step_ms";
    t.verdict = "non-finite";
    rc.timings.push_back(t);
    return;
  }
  std::vector<std::vector<double>> step_a, step_b, opt_a, opt_b;
  for (const auto* r : ra) {
    step_a.push_back(to_ms(step_samples(r->timings)));
    opt_a.push_back(to_ms(phase_samples(r->timings, "optimizer")));
  }
  for (const auto* r : rb) {
    step_b.push_back(to_ms(step_samples(r->timings)));
    opt_b.push_back(to_ms(phase_samples(r->timings, "optimizer")));
  }
  rc.timings.push_back(test_timing("step_ms", step_a, step_b, o, probe, rc));
  if (!pooled(opt_a).empty() || !pooled(opt_b).empty())
    rc.timings.push_back(test_timing("optimizer_ms", opt_a, opt_b, o, probe, rc));
  const auto& st = rc.timings.front();
  if (st.n_a > 0 && st.n_b > 0 && !st.testable)
    rc.notes.push_back(fmt::format(
        "timings untested: {} vs {} samples cannot reach p < {} (smallest p {:.3g}; step median "
        "{:+.1f} %): n too small to reach significance (need {} samples per side); run "
        "dmuon_bench with more --steps or --repeats",
        st.n_a, st.n_b, o.alpha, min_one_sided_p(st.n_a, st.n_b), 100.0 * st.change,
        st.detectable.samples_needed));
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
  const double audit_a = num(a, summary_key::audit_ok.name),
               audit_b = num(b, summary_key::audit_ok.name);
  if (!std::isnan(audit_a) && !std::isnan(audit_b) && audit_a != audit_b)
    d.add("audit", fmt::format("byte audit: A {} vs B {}",
                               audit_a != 0 ? "ok" : text(a, summary_key::audit.name),
                               audit_b != 0 ? "ok" : text(b, summary_key::audit.name)));
  const std::string ca = text(a, summary_key::check.name), cb = text(b, summary_key::check.name);
  const bool ran_a = ca == "passed" || ca == "failed", ran_b = cb == "passed" || cb == "failed";
  if (ran_a && ran_b && ca != cb)
    d.add("check", fmt::format("--check: A {} vs B {}", ca, cb));
  else if (ran_a != ran_b)
    notes.push_back(fmt::format("--check ran in {} only (A: {}, B: {})", ran_a ? "A" : "B",
                                ca.empty() ? "-" : ca, cb.empty() ? "-" : cb));
}

}  // namespace

std::vector<std::pair<std::string, std::string>> run_key_fields(const RunRecord& r) {
  std::vector<std::pair<std::string, std::string>> key;
  for (const auto& f : run_fields())
    if (f.key) key.emplace_back(f.key, key_text(f, r));
  return key;
}

std::string run_key(const RunRecord& r) {
  std::string s;
  for (const auto& [k, v] : run_key_fields(r)) s += (s.empty() ? "" : " ") + k + "=" + v;
  return s;
}

namespace {

// "label=value" fragments of a composite key field (plan, options), by label.
std::map<std::string, std::string> fragments(const std::string& text) {
  std::map<std::string, std::string> out;
  if (text == "-") return out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    auto end = text.find(' ', pos);
    if (end == std::string::npos) end = text.size();
    const std::string f = text.substr(pos, end - pos);
    const auto eq = f.find('=');
    if (eq != std::string::npos) out[f.substr(0, eq)] = f.substr(eq + 1);
    pos = end + 1;
  }
  return out;
}

}  // namespace

std::vector<std::string> key_differences(const RunRecord& a, const RunRecord& b,
                                         const std::map<std::string, std::string>& absent) {
  std::vector<std::string> out;
  const auto value = [&](const std::map<std::string, std::string>& f, const std::string& label) {
    if (auto it = f.find(label); it != f.end()) return it->second;
    auto it = absent.find(label);
    return it != absent.end() && !it->second.empty() ? it->second : std::string("-");
  };
  const auto ka = run_key_fields(a), kb = run_key_fields(b);
  for (std::size_t i = 0; i < ka.size() && i < kb.size(); ++i) {
    if (ka[i].second == kb[i].second) continue;
    if (ka[i].first != "plan" && ka[i].first != "options") {
      out.push_back(fmt::format("{}: {} vs {}", ka[i].first, ka[i].second, kb[i].second));
      continue;
    }
    const auto fa = fragments(ka[i].second), fb = fragments(kb[i].second);
    std::set<std::string> labels;
    for (const auto* f : {&fa, &fb})
      for (const auto& kv : *f) labels.insert(kv.first);
    for (const auto& label : labels)
      if (value(fa, label) != value(fb, label))
        out.push_back(fmt::format("{}: {} vs {}", label, value(fa, label), value(fb, label)));
  }
  return out;
}

std::string RunComparison::check() const {
  if (!mismatches.empty()) return "MISMATCH";
  if (!regressions.empty()) return "SLOWER";
  if (!unreliable.empty()) return "UNRELIABLE";
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
  int n = static_cast<int>(only_a.size() + extra_runs.size());
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

int Comparison::unreliable() const {
  int n = 0;
  for (const auto& r : runs) n += r.unreliable.empty() ? 0 : 1;
  return n;
}

namespace {

// Remarks on the two invocations: timings from different machines or BLAS kernels are not
// comparable, and the gate should say so next to its verdict.
// (The sgemm at start is the machine probe: compare_results weighs it, machine_probe.hpp.)
void compare_provenance(const Provenance& a, const Provenance& b, std::vector<std::string>& out) {
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
  return compare_results(std::vector<const ResultsFile*>{&a}, std::vector<const ResultsFile*>{&b},
                         o);
}

namespace {

// "A", "A2", "B3": the name of a side's k-th file (0-based) in messages.
std::string file_tag(char side, std::size_t k) {
  return k == 0 ? std::string(1, side) : fmt::format("{}{}", side, k + 1);
}

// The first unused run of `f` with key `key`, marking it used; nullptr when there is none.
const RunRecord* take_run(const ResultsFile& f, const std::string& key, std::vector<bool>& used) {
  for (std::size_t j = 0; j < f.runs.size(); ++j)
    if (!used[j] && run_key(f.runs[j]) == key) {
      used[j] = true;
      return &f.runs[j];
    }
  return nullptr;
}

}  // namespace

namespace {

using Files = std::vector<const ResultsFile*>;
// Per file of a side, which of its runs are matched already.
using Used = std::vector<std::vector<bool>>;

void check_options(const CompareOptions& o, const Files& as, const Files& bs) {
  if (!(o.tolerance >= 0) || std::isinf(o.tolerance))
    throw InputError(fmt::format("time tolerance {} is invalid (valid: a fraction >= 0, e.g. 0.1)",
                                 o.tolerance));
  if (!(o.alpha > 0 && o.alpha < 1))
    throw InputError(fmt::format(
        "alpha {} is invalid (valid: a significance level in (0, 1), e.g. 0.05)", o.alpha));
  if (as.empty() || bs.empty())
    throw InputError("dmuon_compare needs at least one results file on each side");
}

// Whether the timings may be compared: every file against A's first (one pair of different
// machines skips all timings), then the sides' machine probes. Notes go to `c`.
bool weigh_machines(const Files& as, const Files& bs, const CompareOptions& o, Comparison& c) {
  const Provenance& a = as.front()->provenance;
  compare_provenance(a, bs.front()->provenance, c.notes);
  std::string why;
  for (const auto& [side, files] : {std::pair<char, const Files*>{'A', &as}, {'B', &bs}})
    for (std::size_t k = 0; k < files->size() && why.empty(); ++k)
      if (side == 'B' || k > 0) {
        why = different_machines(a, (*files)[k]->provenance, o.tolerance);
        if (!why.empty() && (side != 'B' || k > 0))
          why = fmt::format("{} ({} vs A)", why, file_tag(side, k));
      }
  if (!why.empty() && !o.any_machine) {
    c.notes.push_back(
        fmt::format("timings not compared: {} (timings of different machines or "
                    "machine states say nothing about the code; --any-machine "
                    "compares them anyway)",
                    why));
    c.timings_skipped = true;
    return false;
  }
  if (why.empty()) {
    // The probe of each file (one per invocation), weighed per side. (Between different
    // machines, compared with --any-machine, it would weigh the hardware: not done.)
    std::vector<double> pa, pb;
    for (const auto* f : as) pa.push_back(f->provenance.sgemm_gflops);
    for (const auto* f : bs) pb.push_back(f->provenance.sgemm_gflops);
    c.probe = probe_agreement(pa, pb, o.tolerance);
    if (c.probe.disagree())
      c.notes.push_back(describe(c.probe) + "; the timing verdicts are UNRELIABLE (not failures)");
  }
  return true;
}

// The same run in a side's further invocations: each must equal A's deterministically; the ok
// ones join that side's timing samples.
void match_further(char side, const Files& files, Used& used, const std::string& key,
                   const RunRecord& ra, RunComparison& rc, std::vector<const RunRecord*>& runs) {
  for (std::size_t k = 1; k < files.size(); ++k) {
    const RunRecord* r = take_run(*files[k], key, used[k]);
    const std::string tag = file_tag(side, k);
    if (!r) {
      rc.mismatches.push_back(fmt::format("{}: this run is missing", tag));
      continue;
    }
    std::vector<std::string> diffs;
    compare_deterministic(ra, *r, diffs, rc.notes);
    for (auto& d : diffs) rc.mismatches.push_back(fmt::format("{} vs A: {}", tag, d));
    if (r->status == "ok") runs.push_back(r);
  }
}

// Run i of A's first file against its partner `rb` in B's, and both sides' further files.
RunComparison compare_run(const Files& as, const Files& bs, Used& used_a, Used& used_b,
                          std::size_t i, const RunRecord& rb, const CompareOptions& o,
                          const ProbeAgreement& probe) {
  const auto& ra = as.front()->runs[i];
  RunComparison rc;
  rc.a = i;
  rc.b = static_cast<std::size_t>(&rb - bs.front()->runs.data());
  rc.key = run_key(ra);
  rc.status = ra.status;
  rc.a_step_ms = run_step_ms(ra);
  rc.b_step_ms = run_step_ms(rb);
  rc.a_opt_ms = run_optimizer_ms(ra);
  rc.b_opt_ms = run_optimizer_ms(rb);
  compare_deterministic(ra, rb, rc.mismatches, rc.notes);
  std::vector<const RunRecord*> side_a{&ra}, side_b{&rb};
  match_further('A', as, used_a, rc.key, ra, rc, side_a);
  match_further('B', bs, used_b, rc.key, ra, rc, side_b);
  if (ra.status == "ok" && rb.status == "ok" && !o.deterministic_only)
    compare_timings(side_a, side_b, o, probe, rc);
  return rc;
}

// B's runs without a partner (new), and runs of a further file that its side's first file lacks
// (the invocations were not of the same commands).
void collect_unmatched(const Files& as, const Files& bs, Used& used_a, Used& used_b,
                       Comparison& c) {
  const ResultsFile& b = *bs.front();
  for (std::size_t j = 0; j < b.runs.size(); ++j)
    if (!used_b[0][j]) {
      c.only_b.push_back(j);
      c.only_b_keys.push_back(run_key(b.runs[j]));
      // The same new run in B's further invocations is that run again, not an extra one.
      for (std::size_t k = 1; k < bs.size(); ++k) take_run(*bs[k], c.only_b_keys.back(), used_b[k]);
    }
  for (const auto& [side, files, used] :
       {std::tuple<char, const Files*, Used*>{'A', &as, &used_a}, {'B', &bs, &used_b}})
    for (std::size_t k = 1; k < files->size(); ++k)
      for (std::size_t j = 0; j < (*files)[k]->runs.size(); ++j)
        if (!(*used)[k][j])
          c.extra_runs.push_back(fmt::format("{} run {} has no partner in {}: {}",
                                             file_tag(side, k), j, std::string(1, side),
                                             run_key((*files)[k]->runs[j])));
}

}  // namespace

Comparison compare_results(const std::vector<const ResultsFile*>& as,
                           const std::vector<const ResultsFile*>& bs, const CompareOptions& o) {
  check_options(o, as, bs);
  const ResultsFile& a = *as.front();
  const ResultsFile& b = *bs.front();
  Comparison c;
  c.options = o;
  CompareOptions run_options = o;
  if (!o.deterministic_only && !weigh_machines(as, bs, o, c)) run_options.deterministic_only = true;
  // The first files' matching decides the pairs; duplicates pair up in file order.
  Used used_a, used_b;
  for (const auto* f : as) used_a.emplace_back(f->runs.size(), false);
  for (const auto* f : bs) used_b.emplace_back(f->runs.size(), false);
  for (std::size_t i = 0; i < a.runs.size(); ++i) {
    const std::string key = run_key(a.runs[i]);
    used_a[0][i] = true;
    const RunRecord* first_b = take_run(b, key, used_b[0]);
    if (first_b) {
      c.runs.push_back(compare_run(as, bs, used_a, used_b, i, *first_b, run_options, c.probe));
      continue;
    }
    c.only_a.push_back(i);
    c.only_a_keys.push_back(key);
    for (std::size_t k = 1; k < as.size(); ++k) take_run(*as[k], key, used_a[k]);  // same run
  }
  collect_unmatched(as, bs, used_a, used_b, c);
  // A run that disappeared next to one that appeared: usually the same run with an option
  // changed; say which (the fewest differences wins).
  for (auto i : c.only_a) {
    std::vector<std::string> nearest;
    for (auto j : c.only_b) {
      auto d = key_differences(a.runs[i], b.runs[j], o.absent_fragments);
      if (nearest.empty() || d.size() < nearest.size()) nearest = std::move(d);
    }
    std::string text;
    for (const auto& d : nearest) text += (text.empty() ? "" : ", ") + d;
    c.only_a_nearest.push_back(text);
  }
  return c;
}

}  // namespace dmuon::results
