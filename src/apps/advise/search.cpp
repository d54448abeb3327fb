#include "advise/search.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <stdexcept>
#include <tuple>

#include "dmuon/boundary/degradation.hpp"

namespace dmuon::apps::advise {
namespace {

// Status order: fitting runs first, then out-of-memory ones, then those that cannot run.
int status_rank(Status s) {
  return s == Status::ok ? 0 : s == Status::oom ? 1 : 2;
}

// Divisors R of the world that leave a whole TP group per replica (world = R x G x T). A
// world with very many divisors keeps the powers of two and the start's R.
std::vector<std::string> replicate_values(int world, int tp, int start) {
  std::vector<int> all;
  for (int r = 1; r <= world; ++r)
    if (world % r == 0 && (world / r) % tp == 0) all.push_back(r);
  std::vector<std::string> out;
  for (int r : all)
    if (all.size() <= 16 || (r & (r - 1)) == 0 || r == start) out.push_back(std::to_string(r));
  return out;
}

// Module types that repeat and hold parameters below them: the per-layer, per-block and
// per-expert units a `types:` boundary can name (containers and leaves excluded), most
// frequent first, at most 8.
std::vector<std::string> repeated_unit_types(const model::ModuleTree& tree) {
  std::map<std::string, int> count;
  for (const auto& m : tree.modules())
    if (!m.path.empty() && !m.children.empty() && !boundary::is_container_type(m.type))
      ++count[m.type];
  std::vector<std::pair<int, std::string>> types;
  for (const auto& [type, n] : count)
    if (n >= 2) types.emplace_back(-n, type);
  std::sort(types.begin(), types.end());
  std::vector<std::string> out;
  for (const auto& t : types)
    if (out.size() < 8) out.push_back(t.second);
  return out;
}

void add_value(std::vector<std::string>& list, const std::string& v) {
  if (std::find(list.begin(), list.end(), v) == list.end()) list.push_back(v);
}

}  // namespace

void SearchSpace::add_boundary(const std::string& spec, const std::string& origin) {
  if (spec.empty() || boundary_origin.count(spec)) return;
  boundary_origin[spec] = origin;
  values.at(knob("boundary")).push_back(spec);
}

SearchSpace make_search_space(const model::Topology& topo, const Candidate& start, int world,
                              int nvlink_domain, int tp, bool activations,
                              const std::vector<int>& cp) {
  SearchSpace s;
  s.values.resize(knobs().size());
  s.add_boundary(start.value("boundary"), "start");
  s.add_boundary("default", "default");
  if (!topo.recommended_boundary.empty()) s.add_boundary(topo.recommended_boundary, "recommended");
  for (const auto& type : repeated_unit_types(topo.tree))
    s.add_boundary("types:" + type, "type " + type);
  const auto set = [&](const char* key, std::vector<std::string> v) {
    s.values.at(knob(key)) = std::move(v);
  };
  set("replicate", replicate_values(world, tp, std::stoi(start.value("replicate"))));
  set("ep", ep_values(topo.tree, world, nvlink_domain));
  set("reshard", {"z3", "z2"});
  set("prefetch", {"0", "1", "2", "4"});
  set("comm_dtype", {"fp32", "bf16"});
  set("owner_strategy", {"lpt", "lpt_refine", "round_robin"});
  set("cost_model", {"optimizer", "numel"});
  set("pack_threshold", {"0", "1000000", "5000000", "20000000"});
  if (activations) {
    set("ac", {"none", "selective", "full"});
    // Smaller micro-batches, each paired with the accum that keeps the step's batch.
    std::vector<std::string> mb;
    for (const auto m : micro_batch_values(std::stoll(start.value("micro_batch")), start.accum))
      mb.push_back(std::to_string(m));
    set("micro_batch", mb);
    std::vector<std::string> sizes;
    for (const int c : cp) sizes.push_back(std::to_string(c));
    set("cp", sizes);
  }
  // The start's own values are always in (a value of the user's outside these lists; --ac
  // without --seq-len: only the start's "none", and its micro-batch).
  for (std::size_t k = 0; k < knobs().size(); ++k)
    if (knobs()[k]->key_name() != "boundary") add_value(s.values[k], start.value(k));
  // Largest expected effect first; a knob the list misses comes last.
  for (const char* key :
       {"boundary", "ep", "replicate", "reshard", "prefetch", "comm_dtype", "owner_strategy",
        "cost_model", "pack_threshold", "ac", "micro_batch", "cp"})
    s.order.push_back(knob(key));
  for (std::size_t k = 0; k < knobs().size(); ++k)
    if (std::find(s.order.begin(), s.order.end(), k) == s.order.end()) s.order.push_back(k);
  return s;
}

const std::vector<std::string>& memory_knob_keys() {
  static const std::vector<std::string> keys = {"ep",      "ac",          "comm_dtype",
                                                "reshard", "micro_batch", "cp"};
  return keys;
}

bool better(const Outcome& a, const Outcome& b) {
  if (status_rank(a.status) != status_rank(b.status))
    return status_rank(a.status) < status_rank(b.status);
  if (a.status == Status::ok) return a.step_ms < b.step_ms;
  if (a.status == Status::oom) return a.excess_bytes < b.excess_bytes;
  return false;
}

const Evaluated& SearchResult::of(const Candidate& c) const {
  for (const auto& e : evaluated)
    if (e.candidate.key() == c.key()) return e;
  throw std::logic_error("advise: candidate not evaluated: " + c.key());
}

Evaluated& SearchResult::of(const Candidate& c) {
  return const_cast<Evaluated&>(static_cast<const SearchResult&>(*this).of(c));
}

namespace {

class Descent {
 public:
  Descent(Evaluator& ev, const SearchOptions& o, SearchResult& r)
      : ev_(ev), o_(o), r_(r), t0_(std::chrono::steady_clock::now()) {}

  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }

  // Whether a projection like `c` would still end within the limit. Its cost is estimated as
  // a + b * sites: a, the quickest projection so far (the fixed cost at this world), b, the
  // most any projection took per site beyond it (projection time grows with world x sites).
  // Before a fine boundary has run, b is 0: the first one may overrun the limit once.
  bool affordable(const Candidate& c) {
    if (fixed_s_ < 0) return true;
    const int sites = std::max(1, ev_.plan_sites(c));
    return elapsed() + fixed_s_ + per_site_s_ * sites <= o_.time_limit_s;
  }

  // Only projections with more sites than the coarsest one teach b: between projections of
  // the coarsest boundary the time differs by noise (a busy machine), and that noise divided by
  // their few sites, times a fine boundary's thousands, would skip the fine one for nothing.
  void learn_cost(const Outcome& out) {
    if (out.status == Status::rejected) return;
    fixed_s_ = fixed_s_ < 0 ? out.wall_s : std::min(fixed_s_, out.wall_s);
    const int coarsest = std::max(1, out.sites);
    fewest_sites_ = fewest_sites_ < 0 ? coarsest : std::min(fewest_sites_, coarsest);
    per_site_s_ = 0;
    for (const auto& e : r_.evaluated)
      if (e.outcome.status != Status::rejected && e.outcome.sites > fewest_sites_)
        per_site_s_ = std::max(
            per_site_s_, std::max(0.0, e.outcome.wall_s - fixed_s_) / std::max(1, e.outcome.sites));
  }

  // Projects `c` (once); false when it would overrun the time limit (skipped, counted once).
  bool visit(const Candidate& c) {
    if (ev_.known(c)) return true;
    if (!affordable(c)) {
      r_.time_limit_hit = true;
      if (skipped_.insert(c.key()).second) ++r_.skipped;
      return false;
    }
    if (skipped_.erase(c.key())) --r_.skipped;
    const Outcome& out = ev_.evaluate(c);
    r_.evaluated.push_back({c, out, std::nullopt, false});
    learn_cost(out);
    if (!out.suggested_boundary.empty()) r_.space.add_boundary(out.suggested_boundary, "suggested");
    if (o_.progress) {
      const auto& best = ev_.evaluate(r_.best);
      o_.progress(fmt::format("advise: {} projected, best {} ({}), {:.0f} s of {:g} s",
                              r_.evaluated.size(),
                              best.status == Status::ok ? fmt::format("{:.1f} ms", best.step_ms)
                                                        : std::string(status_name(best.status)),
                              describe_changes(r_.best, r_.start), elapsed(), o_.time_limit_s));
    }
    return true;
  }

  // Better, or as good with fewer knobs changed against the start (the simpler advice).
  bool preferred(const Candidate& a, const Candidate& b) {
    const Outcome& oa = ev_.evaluate(a);
    const Outcome& ob = ev_.evaluate(b);
    if (better(oa, ob)) return true;
    if (better(ob, oa) || oa.status != ob.status) return false;
    return oa.peak_bytes <= ob.peak_bytes &&
           changed_knobs(a, r_.start) < changed_knobs(b, r_.start);
  }

  // Whether a candidate already evaluated out of memory, and passing `also`, has the knobs of
  // `c` but a smaller value of knob `k` (the pruning rules of search.hpp's SearchResult).
  template <class Also>
  bool smaller_out_of_memory(const Candidate& c, std::size_t k, Also also) const {
    const int v = std::stoi(c.value(k));
    for (const auto& e : r_.evaluated) {
      if (e.outcome.status != Status::oom || std::stoi(e.candidate.value(k)) >= v ||
          !also(e.outcome))
        continue;
      try {
        if (e.candidate.with(k, c.value(k)).key() == c.key()) return true;
      } catch (const std::logic_error&) {
        // No paired value from there (the CP knob's whole accum): not the same knobs.
      }
    }
    return false;
  }

  // Whether `c` needs at least the memory of a candidate already out of memory: the same
  // knobs but a smaller replicate size R (SearchResult::pruned).
  bool out_of_memory_by_replication(const Candidate& c) const {
    return smaller_out_of_memory(c, knob("replicate"), [](const Outcome&) { return true; });
  }

  // Whether `c` cannot fit because a smaller CP size at the same knobs is out of memory by
  // more than all its activations (SearchResult::pruned_cp).
  bool out_of_memory_by_context_parallel(const Candidate& c) const {
    return smaller_out_of_memory(
        c, knob("cp"), [](const Outcome& o) { return o.excess_bytes > o.activation_bytes; });
  }

  // One knob with the others at the best so far; true when the best changed.
  bool sweep_knob(std::size_t k) {
    const Candidate base = r_.best;
    bool changed = false;
    // The list can grow while it is swept (boundary suggestions): index, not iterators.
    for (std::size_t i = 0; i < r_.space.of(k).size(); ++i) {
      const Candidate c = base.with(k, r_.space.of(k)[i]);
      if (!ev_.known(c) && out_of_memory_by_replication(c)) {
        if (pruned_.insert(c.key()).second) ++r_.pruned;
        continue;
      }
      if (!ev_.known(c) && out_of_memory_by_context_parallel(c)) {
        if (pruned_.insert(c.key()).second) ++r_.pruned_cp;
        continue;
      }
      if (!visit(c)) continue;
      if (preferred(c, r_.best)) {
        r_.best = c;
        changed = true;
      }
    }
    return changed;
  }

  void run() {
    r_.best = r_.start;
    if (!visit(r_.start)) return;
    if (ev_.evaluate(r_.start).status == Status::oom) memory_first();
    for (r_.passes = 1; r_.passes <= o_.max_passes; ++r_.passes) {
      bool changed = false;
      for (std::size_t k : r_.space.order) changed = sweep_knob(k) || changed;
      if (!changed) break;
    }
    r_.passes = std::min(r_.passes, o_.max_passes);
  }

  // The start does not fit: the knobs that save memory go first, in memory_knob_keys' order,
  // twice.
  void memory_first() {
    auto& order = r_.space.order;
    std::vector<std::size_t> first;
    for (const auto& key : memory_knob_keys())
      if (r_.space.of(knob(key)).size() > 1) {
        first.push_back(knob(key));
        r_.memory_first.push_back(key);
      }
    order.erase(std::remove_if(order.begin(), order.end(),
                               [&](std::size_t k) {
                                 return std::find(first.begin(), first.end(), k) != first.end();
                               }),
                order.end());
    order.insert(order.begin(), first.begin(), first.end());
    // And once more right after: their first sweep compares candidates still out of memory by
    // their excess (DeepSeek-V3 at 256 ranks: E = 8 over by less than E = 256 before --ac
    // full), the second at the first configuration that fits, by its step.
    order.insert(order.begin() + static_cast<std::ptrdiff_t>(first.size()), first.begin(),
                 first.end());
  }

  // fsdp-adamw at the knobs of the start and of the best rows (DMuon against AdamW).
  void baselines() {
    std::vector<Evaluated*> rows = {&r_.of(r_.start)};
    for (const auto* e : ranked(r_, o_.baselines)) rows.push_back(&r_.of(e->candidate));
    for (auto* e : rows) {
      if (e->baseline || e->outcome.status == Status::rejected) continue;
      if (!affordable(e->candidate)) {
        r_.time_limit_hit = true;
        ++r_.skipped_baselines;
        continue;
      }
      e->baseline = ev_.evaluate(e->candidate, engine::Method::fsdp_adamw);
    }
  }

 private:
  Evaluator& ev_;
  const SearchOptions& o_;
  SearchResult& r_;
  std::chrono::steady_clock::time_point t0_;
  double fixed_s_ = -1;  // < 0: nothing projected yet
  double per_site_s_ = 0;
  int fewest_sites_ = -1;          // the coarsest projected boundary's sites (< 0: none yet)
  std::set<std::string> skipped_;  // keys of the candidates skipped and not projected since
  std::set<std::string> pruned_;   // keys of the candidates pruned by replication
};

// Among the fitting candidates within the tolerance of the fastest, the fewest changed knobs,
// then the least memory, then the fastest: a 0.2 % gain is no reason to change four knobs or
// to take 15 GB more. The winner is shown even where another dominates it.
void pick_winner(SearchResult& r) {
  r.fastest = r.best;
  const auto& fastest = r.of(r.best).outcome;
  if (fastest.status != Status::ok) return;
  const double limit = fastest.step_ms * (1 + r.tolerance);
  const Evaluated* win = &r.of(r.best);
  const auto key = [&](const Evaluated& e) {
    return std::tuple{changed_knobs(e.candidate, r.start), e.outcome.peak_bytes, e.outcome.step_ms};
  };
  for (const auto& e : r.evaluated)
    if (e.outcome.status == Status::ok && e.outcome.step_ms <= limit && key(e) < key(*win))
      win = &e;
  r.best = win->candidate;
  r.of(r.best).dominated = false;
}

// Dominated: another fitting candidate is no slower and needs no more memory, and is strictly
// better in one of the two, or equal in both with fewer knobs changed (ties show once).
void mark_dominated(SearchResult& r) {
  for (auto& a : r.evaluated) {
    if (a.outcome.status != Status::ok) continue;
    for (const auto& b : r.evaluated) {
      if (&a == &b || b.outcome.status != Status::ok) continue;
      const bool no_worse =
          b.outcome.step_ms <= a.outcome.step_ms && b.outcome.peak_bytes <= a.outcome.peak_bytes;
      const bool strictly =
          b.outcome.step_ms < a.outcome.step_ms || b.outcome.peak_bytes < a.outcome.peak_bytes;
      const int ca = changed_knobs(a.candidate, r.start), cb = changed_knobs(b.candidate, r.start);
      const bool simpler_tie = cb < ca || (cb == ca && &b < &a);
      if (no_worse && (strictly || simpler_tie)) {
        a.dominated = true;
        break;
      }
    }
  }
}

}  // namespace

SearchResult search(Evaluator& evaluator, const Candidate& start, SearchSpace space,
                    const SearchOptions& options) {
  SearchResult r;
  r.start = start;
  r.space = std::move(space);
  r.tolerance = options.tolerance;
  Descent d(evaluator, options, r);
  d.run();
  mark_dominated(r);
  pick_winner(r);
  d.baselines();
  r.wall_s = d.elapsed();
  return r;
}

std::vector<const Evaluated*> ranked(const SearchResult& r, int top) {
  std::vector<const Evaluated*> out;
  for (const auto& e : r.evaluated)
    if (e.outcome.status == Status::ok && !e.dominated) out.push_back(&e);
  std::stable_sort(out.begin(), out.end(), [](const Evaluated* a, const Evaluated* b) {
    return a->outcome.step_ms < b->outcome.step_ms;
  });
  if (static_cast<int>(out.size()) > top) out.resize(static_cast<std::size_t>(top));
  return out;
}

}  // namespace dmuon::apps::advise
