#include "dmuon/project/reduced_layout.hpp"

#include <algorithm>
#include <stdexcept>

namespace dmuon::project {

using engine::GroupKind;
using engine::ParamLayout;
using engine::Storage;

LayoutReducer::LayoutReducer(const engine::StepLayout& reference, const plan::Plan&)
    : ref_(reference) {
  if (reference.method != engine::Method::dmuon)
    throw std::logic_error("LayoutReducer: only DMuon layouts are reduced");
  const int G = reference.shards();
  // Everything reduce() does not rebuild (windows, pools, wire types, alt arenas, live
  // weights, TP buffers) is the reference's; what it rebuilds is emptied here, once.
  shell_ = reference;
  shell_.params.clear();
  shell_.pairs.clear();
  shell_.groups.clear();
  shell_.master_elems = shell_.state_elems = shell_.second_state_elems = 0;
  shell_.grad_arena_elems = 0;
  for (const auto& g : reference.groups) {
    engine::GroupLayout shell;
    shell = g;  // then without its members and pairs, which reduce() picks per rank
    shell.members.clear();
    shell.pairs.clear();
    group_shells_.push_back(std::move(shell));
  }
  nameless_ = reference.params;
  for (auto& p : nameless_) p.name.clear();  // names are never read by the schedule
  position_.assign(reference.params.size(), 0);
  group_pair_numel_.assign(reference.groups.size(), 0);
  for (std::size_t g = 0; g < reference.groups.size(); ++g) {
    const auto& G_ = reference.groups[g];
    for (std::size_t i = 0; i < G_.members.size(); ++i)
      position_[static_cast<std::size_t>(G_.members[i])] = static_cast<int>(i);
    for (int pr : G_.pairs) {  // pooled gradients: --route dtype pairs keep their own
      const auto& pair = reference.pairs[static_cast<std::size_t>(pr)];
      if (!pair.alt_wire) group_pair_numel_[g] += pair.numel;
    }
  }
  pairs_of_column_.resize(static_cast<std::size_t>(G));
  for (std::size_t pr = 0; pr < reference.pairs.size(); ++pr)
    pairs_of_column_[static_cast<std::size_t>(reference.pairs[pr].owner_column)].push_back(
        static_cast<int>(pr));
  // Pairs are created group by group (make_layout), so each list is in group order already.
}

ReducedLayout LayoutReducer::reduce(int world_rank) const {
  const auto& ref = ref_;
  ReducedLayout out;
  auto& L = out.layout;
  L = shell_;  // kept parameters keep their TP fields (tp_dim, tp_owner, logical)
  L.me.rank = world_rank;
  const int rank = L.me.dp();  // owners are DP ranks
  out.aggregate.assign(ref.groups.size(), -1);

  const auto& mine = pairs_of_column_[static_cast<std::size_t>(L.me.column())];
  std::size_t cursor = 0;  // into `mine`, which is in group order
  std::vector<int> kept;
  for (std::size_t g = 0; g < ref.groups.size(); ++g) {
    const auto& src = ref.groups[g];
    engine::GroupLayout grp = group_shells_[g];
    const int gi = static_cast<int>(g);
    if (src.kind != GroupKind::dmuon_site) {
      // The FSDP unit of the non-dedicated parameters: kept whole (every rank updates a shard
      // of each).
      grp.grad_elems = src.grad_elems;
      for (int pi : src.members) {
        grp.members.push_back(static_cast<int>(L.params.size()));
        out.reference.push_back(pi);
        L.params.push_back(nameless_[static_cast<std::size_t>(pi)]);
        const auto& p = L.params.back();
        if (p.sharded()) {
          L.master_elems += p.chunk;
          L.state_elems += p.chunk;
          if (!p.muon) L.second_state_elems += p.chunk;
        }
      }
      L.groups.push_back(std::move(grp));
      continue;
    }
    // Pairs rooted in this rank's column: kept with their members.
    kept.clear();
    std::int64_t rooted_numel = 0;
    std::vector<int> pair_index;
    for (; cursor < mine.size() && ref.pairs[static_cast<std::size_t>(mine[cursor])].group == gi;
         ++cursor) {
      const auto& src_pair = ref.pairs[static_cast<std::size_t>(mine[cursor])];
      engine::PairLayout pr = src_pair;
      pr.rooted_here = true;
      pr.owned = pr.owner == rank;
      pr.grad_persistent = true;
      if (!pr.alt_wire) rooted_numel += pr.numel;
      L.master_elems += pr.numel;
      if (pr.owned) L.state_elems += pr.numel;
      pair_index.push_back(static_cast<int>(L.pairs.size()));
      L.pairs.push_back(std::move(pr));
      kept.insert(kept.end(), src_pair.members.begin(), src_pair.members.end());
    }
    grp.grad_elems = group_pair_numel_[g] - rooted_numel;  // the pairs rooted elsewhere
    std::sort(kept.begin(), kept.end(), [&](int a, int b) {
      return position_[static_cast<std::size_t>(a)] < position_[static_cast<std::size_t>(b)];
    });
    if (kept.size() < src.members.size()) {
      ParamLayout agg;
      agg.pid = -1;
      agg.storage = Storage::remote;
      agg.muon = true;
      agg.updated_here = false;
      agg.group = gi;
      out.aggregate[g] = static_cast<int>(L.params.size());
      grp.members.push_back(static_cast<int>(L.params.size()));
      out.reference.push_back(-1);
      L.params.push_back(std::move(agg));
    }
    // Remap the kept members and their pairs to the reduced indices.
    const int first_kept = static_cast<int>(L.params.size());
    for (int pi : kept) {
      grp.members.push_back(static_cast<int>(L.params.size()));
      out.reference.push_back(pi);
      ParamLayout p = nameless_[static_cast<std::size_t>(pi)];
      const bool owned = p.owner == rank;
      p.storage = owned ? Storage::owned : Storage::column;
      p.updated_here = owned;
      p.grad_persistent = true;
      p.state_elems = owned ? p.numel : 0;
      L.params.push_back(std::move(p));
    }
    for (int pr : pair_index) {
      auto& pair = L.pairs[static_cast<std::size_t>(pr)];
      for (int& member : pair.members) {
        const auto it = std::find(kept.begin(), kept.end(), member);
        member = first_kept + static_cast<int>(it - kept.begin());
        L.params[static_cast<std::size_t>(member)].pair = pr;
      }
    }
    for (int pr : pair_index) L.pairs[static_cast<std::size_t>(pr)].group = gi;
    grp.pairs = pair_index;
    L.groups.push_back(std::move(grp));
  }
  return out;
}

}  // namespace dmuon::project
