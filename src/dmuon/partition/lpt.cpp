#include "dmuon/partition/lpt.hpp"

#include <algorithm>
#include <numeric>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

namespace dmuon::partition::detail {

namespace {

// SPEC §5's LPT order: (-cost, -numel, key as a string with none as "", member names).
std::vector<int> lpt_order(const Partition& p, const std::vector<std::string>& unit_names) {
  std::vector<int> order(p.units.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    const Unit& ua = p.units[a];
    const Unit& ub = p.units[b];
    if (ua.cost != ub.cost) return ua.cost > ub.cost;
    if (ua.numel != ub.numel) return ua.numel > ub.numel;
    const std::string& ka = ua.key ? *ua.key : std::string();
    const std::string& kb = ub.key ? *ub.key : std::string();
    if (ka != kb) return ka < kb;
    return unit_names[a] < unit_names[b];
  });
  return order;
}

// The slots ranked by SPEC §5's criteria after "already used by this key": (column cost load,
// slot cost load, column numel load, slot numel load, slot index); the column terms only with
// HSDP column balance. Kept ordered as loads change.
class RankedSlots {
 public:
  explicit RankedSlots(const Partition& p)
      : p_(p),
        columns_(p.options.replicate > 1 && p.options.column_balance),
        cost_(p.slots.size(), 0),
        numel_(p.slots.size(), 0),
        col_cost_(static_cast<std::size_t>(p.options.shard), 0),
        col_numel_(static_cast<std::size_t>(p.options.shard), 0) {
    for (int s = 0; s < static_cast<int>(p.slots.size()); ++s) ranked_.insert(entry(s));
  }

  using Entry = std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, int>;
  Entry entry(int s) const {
    const auto c = static_cast<std::size_t>(p_.slots[static_cast<std::size_t>(s)].shard);
    const auto i = static_cast<std::size_t>(s);
    return Entry{columns_ ? col_cost_[c] : 0, cost_[i], columns_ ? col_numel_[c] : 0, numel_[i], s};
  }
  const std::set<Entry>& ranked() const { return ranked_; }

  void add(int best, const Unit& unit) {
    // The column terms change every slot of the column.
    const int c = p_.slots[static_cast<std::size_t>(best)].shard;
    std::vector<int> touched;
    if (columns_) {
      for (int r = 0; r < p_.options.replicate; ++r)
        touched.push_back(c * p_.options.replicate + r);
    } else {
      touched.push_back(best);
    }
    for (int s : touched) ranked_.erase(entry(s));
    cost_[static_cast<std::size_t>(best)] += unit.cost;
    numel_[static_cast<std::size_t>(best)] += unit.numel;
    col_cost_[static_cast<std::size_t>(c)] += unit.cost;
    col_numel_[static_cast<std::size_t>(c)] += unit.numel;
    for (int s : touched) ranked_.insert(entry(s));
  }

 private:
  const Partition& p_;
  bool columns_;
  std::vector<std::int64_t> cost_, numel_, col_cost_, col_numel_;
  std::set<Entry> ranked_;
};

// Slots a key already uses: first-use order plus a set for O(1) membership.
struct KeySlots {
  std::vector<int> order;
  std::unordered_set<int> set;
};

// The slot LPT gives the next unit of a key using `used`.
int pick_slot(const RankedSlots& slots, const KeySlots& used, int max_owners, int slot_count,
              bool prefer_spread) {
  if (max_owners > 0 && static_cast<int>(used.order.size()) >= max_owners) {
    // Only the key's slots; all are "used", so the first criterion ties.
    int best = -1;
    RankedSlots::Entry best_e{};
    for (int s : used.order) {
      const auto e = slots.entry(s);
      if (best < 0 || e < best_e) {
        best = s;
        best_e = e;
      }
    }
    return best;
  }
  if (!prefer_spread || static_cast<int>(used.order.size()) == slot_count)
    return std::get<4>(*slots.ranked().begin());  // every slot used: the cheapest overall
  // Cheapest slot not yet used by this key (at most |used| entries are skipped).
  for (const auto& e : slots.ranked())
    if (!used.set.count(std::get<4>(e))) return std::get<4>(e);
  return -1;  // unreachable: fewer used slots than slots
}

}  // namespace

void assign_lpt(Partition& p, const std::vector<std::string>& unit_names, bool prefer_spread) {
  p.visit_order = lpt_order(p, unit_names);
  RankedSlots slots(p);
  std::unordered_map<std::string, KeySlots> used;  // "none" keys share one entry
  p.unit_slot.assign(p.units.size(), -1);
  for (int u : p.visit_order) {
    const Unit& unit = p.units[static_cast<std::size_t>(u)];
    auto& key_slots = used[unit.key ? "k" + *unit.key : std::string("n")];
    const int best = pick_slot(slots, key_slots, p.options.max_owners_per_group,
                               static_cast<int>(p.slots.size()), prefer_spread);
    slots.add(best, unit);
    if (key_slots.set.insert(best).second) key_slots.order.push_back(best);
    p.unit_slot[static_cast<std::size_t>(u)] = best;
  }
}

namespace {

// Count of same-key units per slot, for the spreading guard.
struct KeyCounts {
  std::unordered_map<std::string, std::vector<int>> per_key;  // key -> count per slot
  std::vector<std::string> key_of_unit;
  int slots;
  KeyCounts(const Partition& p) : slots(static_cast<int>(p.slots.size())) {
    for (std::size_t u = 0; u < p.units.size(); ++u) {
      key_of_unit.push_back(p.units[u].key ? "k" + *p.units[u].key : std::string("n"));
      auto& v = per_key[key_of_unit.back()];
      if (v.empty()) v.assign(static_cast<std::size_t>(slots), 0);
      ++v[static_cast<std::size_t>(p.unit_slot[u])];
    }
  }
  int count(int u, int slot) const { return per_key.at(key_of_unit[u])[slot]; }
  void move(int u, int from, int to) {
    auto& v = per_key[key_of_unit[u]];
    --v[from];
    ++v[to];
  }
};

}  // namespace

void refine_local_search(Partition& p) {
  const int S = static_cast<int>(p.slots.size());
  if (S < 2 || p.units.size() < 2) return;
  std::vector<std::int64_t> load(S, 0);
  std::vector<std::vector<int>> members(S);
  for (std::size_t u = 0; u < p.units.size(); ++u) {
    load[p.unit_slot[u]] += p.units[u].cost;
    members[p.unit_slot[u]].push_back(static_cast<int>(u));
  }
  KeyCounts keys(p);
  auto relocate = [&](int u, int from, int to) {
    auto& m = members[from];
    m.erase(std::find(m.begin(), m.end(), u));
    members[to].push_back(u);
    load[from] -= p.units[u].cost;
    load[to] += p.units[u].cost;
    keys.move(u, from, to);
    p.unit_slot[u] = to;
  };
  // Each accepted step strictly lowers (makespan, #slots at makespan): termination is
  // guaranteed; the cap only bounds pathological inputs.
  const int max_steps = 20 * S + 1000;
  for (int step = 0; step < max_steps; ++step) {
    const int top = static_cast<int>(std::max_element(load.begin(), load.end()) - load.begin());
    const std::int64_t makespan = load[top];
    // Candidate: (adds_collision, resulting max of the two touched slots, slot, unit, partner).
    struct Move {
      bool collision;
      std::int64_t peak;
      int to;
      int unit;
      int partner;  // -1 for a plain move
    };
    bool found = false;
    Move best{};
    auto consider = [&](const Move& m) {
      if (!found || std::tie(m.collision, m.peak, m.to, m.unit, m.partner) <
                        std::tie(best.collision, best.peak, best.to, best.unit, best.partner)) {
        best = m;
        found = true;
      }
    };
    for (int u : members[top]) {
      const std::int64_t cu = p.units[u].cost;
      for (int t = 0; t < S; ++t) {
        if (t == top) continue;
        // Plain move.
        if (load[t] + cu < makespan) {
          const bool coll = keys.count(u, t) > 0;
          consider({coll, std::max(load[top] - cu, load[t] + cu), t, u, -1});
        }
        // Swap with a cheaper unit on t.
        for (int v : members[t]) {
          const std::int64_t cv = p.units[v].cost;
          if (cv >= cu) continue;
          const std::int64_t nt = load[t] - cv + cu, ntop = load[top] - cu + cv;
          if (nt >= makespan || ntop >= makespan) continue;
          const bool coll =
              keys.count(u, t) - (keys.key_of_unit[u] == keys.key_of_unit[v] ? 1 : 0) > 0 ||
              keys.count(v, top) - (keys.key_of_unit[u] == keys.key_of_unit[v] ? 1 : 0) > 0;
          consider({coll, std::max(nt, ntop), t, u, v});
        }
      }
    }
    if (!found) break;
    relocate(best.unit, top, best.to);
    if (best.partner >= 0) relocate(best.partner, best.to, top);
  }
}

}  // namespace dmuon::partition::detail
