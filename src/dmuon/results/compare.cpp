#include "dmuon/results/compare.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "dmuon/base/error.hpp"
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

void compare_deterministic(const RunRecord& a, const RunRecord& b, std::vector<std::string>& out) {
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
}

void compare_timing(const char* what, double a, double b, double tol, RunComparison& rc) {
  if (!(a > 0) || std::isnan(b)) return;
  const double change = 100.0 * (b - a) / a;
  if (b > a * (1.0 + tol))
    rc.regressions.push_back(
        fmt::format("{}: A {:.4f} ms, B {:.4f} ms ({:+.1f} %, tolerance {:.1f} %)", what, a, b,
                    change, 100.0 * tol));
  else if (b < a * (1.0 - tol))
    rc.improvements.push_back(
        fmt::format("{}: A {:.4f} ms, B {:.4f} ms ({:+.1f} %)", what, a, b, change));
}

}  // namespace

std::string run_key(const RunRecord& r) {
  return fmt::format(
      "{}/{} boundary={} ({}) method={} reshard={} grad_reduce={} prefetch={} world={} R={} "
      "owners={} cost={} device={} comm={} ns={}/{} pipeline={}",
      r.topology, r.preset.empty() ? "-" : r.preset, r.boundary_spec,
      r.strict ? "strict" : "lenient", r.method, r.reshard, r.grad_reduce, r.prefetch, r.world_size,
      r.replicate, r.partition.strategy, r.partition.cost_model, r.device, r.comm_dtype, r.ns,
      r.ns_dtype, r.optimizer_pipeline);
}

std::string RunComparison::check() const {
  if (!mismatches.empty()) return "MISMATCH";
  if (!regressions.empty()) return "SLOWER";
  if (!improvements.empty()) return "FASTER";
  return "OK";
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

Comparison compare_results(const ResultsFile& a, const ResultsFile& b, double tolerance) {
  if (!(tolerance >= 0) || std::isinf(tolerance))
    throw InputError(
        fmt::format("time tolerance {} is invalid (valid: a fraction >= 0, e.g. 0.1)", tolerance));
  Comparison c;
  c.tolerance = tolerance;
  std::vector<bool> used(b.runs.size(), false);
  for (std::size_t i = 0; i < a.runs.size(); ++i) {
    const std::string key = run_key(a.runs[i]);
    std::size_t j = 0;
    while (j < b.runs.size() && (used[j] || run_key(b.runs[j]) != key)) ++j;
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
    compare_deterministic(ra, rb, rc.mismatches);
    if (ra.status == "ok" && rb.status == "ok") {
      compare_timing("step_ms", rc.a_step_ms, rc.b_step_ms, tolerance, rc);
      compare_timing("optimizer_ms", rc.a_opt_ms, rc.b_opt_ms, tolerance, rc);
    }
    c.runs.push_back(std::move(rc));
  }
  for (std::size_t j = 0; j < b.runs.size(); ++j)
    if (!used[j]) {
      c.only_b.push_back(j);
      c.only_b_keys.push_back(run_key(b.runs[j]));
    }
  return c;
}

}  // namespace dmuon::results
