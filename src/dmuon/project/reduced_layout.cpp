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
      if (!pair.alt_grad) group_pair_numel_[g] += pair.numel;
    }
  }
  for (const auto& g : reference.groups)
    if (g.kind != GroupKind::dmuon_site) unit_params_ += g.members.size();
  pairs_of_column_.resize(static_cast<std::size_t>(G));
  members_of_column_.assign(static_cast<std::size_t>(G), 0);
  // --ep E < G: an expert group's pair is rooted at its owner's member index j there, which
  // every column c with c div E = j owns in its own group (R = 1).
  const int E = reference.me.grid.ep;
  for (std::size_t pr = 0; pr < reference.pairs.size(); ++pr) {
    const auto& pair = reference.pairs[pr];
    const bool expert =
        reference.groups[static_cast<std::size_t>(pair.group)].comm == CommGroup::expert;
    const int first = expert ? pair.owner_column * E : pair.owner_column;
    for (int c = first; c < (expert ? first + E : first + 1); ++c) {
      pairs_of_column_[static_cast<std::size_t>(c)].push_back(static_cast<int>(pr));
      members_of_column_[static_cast<std::size_t>(c)] += pair.members.size();
    }
  }
  // Pairs are created group by group (make_layout), so each list is in group order already.
}

// One rank's reduction, group by group: the FSDP unit kept whole; a DMuon site reduced to the
// pairs rooted in this rank's column with their members, plus one aggregate standing for the
// site's other members. Everything else is the reference's (the shells are its copies).
class LayoutReducer::Reduction {
 public:
  // `reuse`: a layout reduced before, whose storage is kept (its groups' member lists: one
  // allocation per group otherwise, 15,000 per rank); its contents are all overwritten.
  Reduction(const LayoutReducer& reducer, int world_rank, ReducedLayout reuse)
      : r_(reducer), out_(std::move(reuse)), L_(out_.layout) {
    std::vector<engine::GroupLayout> groups = std::move(L_.groups);
    L_ = r_.shell_;  // kept parameters keep their TP fields (tp_dim, tp_owner, logical)
    L_.groups = std::move(groups);
    L_.groups.resize(r_.ref_.groups.size());  // each one assigned by run()
    out_.reference.clear();
    L_.me.rank = world_rank;
    rank_ = L_.me.dp();  // owners are DP ranks
    out_.aggregate.assign(r_.ref_.groups.size(), -1);
    mine_ = &r_.pairs_of_column_[static_cast<std::size_t>(L_.me.column())];
    // At most one aggregate per group besides the kept parameters: one allocation each.
    const std::size_t params = r_.ref_.groups.size() + r_.unit_params_ +
                               r_.members_of_column_[static_cast<std::size_t>(L_.me.column())];
    L_.params.reserve(params);
    out_.reference.reserve(params);
    L_.pairs.reserve(mine_->size());
  }

  ReducedLayout run() {
    for (std::size_t g = 0; g < r_.ref_.groups.size(); ++g) {
      if (r_.ref_.groups[g].kind != GroupKind::dmuon_site)
        keep_whole(g);
      else
        reduce_site(g);
    }
    return std::move(out_);
  }

 private:
  // The FSDP unit of the non-dedicated parameters, or an EP rank's experts: kept whole (every
  // rank updates a shard of each, or its own experts).
  void keep_whole(std::size_t g) {
    const auto& src = r_.ref_.groups[g];
    engine::GroupLayout& grp = L_.groups[g];
    grp = r_.group_shells_[g];
    grp.grad_elems = src.grad_elems;
    for (int pi : src.members) {
      grp.members.push_back(static_cast<int>(L_.params.size()));
      out_.reference.push_back(pi);
      L_.params.push_back(r_.nameless_[static_cast<std::size_t>(pi)]);
      const auto& p = L_.params.back();
      // Its state as make_layout laid it out (lay_out_state): a shard, or a whole replica or
      // EP expert.
      if (p.master_offset >= 0) {
        L_.master_elems += p.state_elems;
        L_.state_elems += p.state_elems;
        if (!p.muon) L_.second_state_elems += p.state_elems;
      }
    }
  }

  void reduce_site(std::size_t g) {
    const int gi = static_cast<int>(g);
    engine::GroupLayout& grp = L_.groups[g];
    grp = r_.group_shells_[g];
    std::int64_t rooted_numel = 0;
    const std::vector<int> pair_index = keep_rooted_pairs(gi, rooted_numel);
    grp.grad_elems = r_.group_pair_numel_[g] - rooted_numel;  // the pairs rooted elsewhere
    std::sort(kept_.begin(), kept_.end(), [&](int a, int b) {
      return r_.position_[static_cast<std::size_t>(a)] < r_.position_[static_cast<std::size_t>(b)];
    });
    if (kept_.size() < r_.ref_.groups[g].members.size()) add_aggregate(gi, grp);
    const int first_kept = add_kept_members(grp);
    remap_pairs(pair_index, first_kept, gi);
    grp.pairs = pair_index;
  }

  // The pairs of group `gi` rooted in this rank's column, copied into the layout; their
  // members (reference indices) into kept_. Returns the pairs' indices in the layout.
  std::vector<int> keep_rooted_pairs(int gi, std::int64_t& rooted_numel) {
    kept_.clear();
    std::vector<int> pair_index;
    const std::vector<int>& mine = *mine_;
    for (; cursor_ < mine.size() &&
           r_.ref_.pairs[static_cast<std::size_t>(mine[cursor_])].group == gi;
         ++cursor_) {
      const auto& src_pair = r_.ref_.pairs[static_cast<std::size_t>(mine[cursor_])];
      engine::PairLayout pr = src_pair;
      pr.rooted_here = true;
      if (expert_group(gi)) pr.owner = rank_;  // this rank's own group's owner of that slot
      pr.owned = pr.owner == rank_;
      pr.grad_persistent = true;
      if (!pr.alt_grad) rooted_numel += pr.numel;
      L_.master_elems += pr.numel;
      if (pr.owned) L_.state_elems += pr.numel;
      pair_index.push_back(static_cast<int>(L_.pairs.size()));
      L_.pairs.push_back(std::move(pr));
      kept_.insert(kept_.end(), src_pair.members.begin(), src_pair.members.end());
    }
    return pair_index;
  }

  // One parameter standing for the members of group `gi` that are not kept.
  // Built in place: one per site and rank, and a copy of one assembled on the stack stalls on
  // store forwarding.
  void add_aggregate(int gi, engine::GroupLayout& grp) {
    const int index = static_cast<int>(L_.params.size());
    out_.aggregate[static_cast<std::size_t>(gi)] = index;
    grp.members.push_back(index);
    out_.reference.push_back(-1);
    ParamLayout& agg = L_.params.emplace_back();
    agg.pid = -1;
    agg.storage = Storage::remote;
    agg.muon = true;
    agg.updated_here = false;
    agg.group = gi;
  }

  // The kept members, in group order, as this rank holds them. Returns the first one's index.
  int add_kept_members(engine::GroupLayout& grp) {
    const int first_kept = static_cast<int>(L_.params.size());
    for (int pi : kept_) {
      grp.members.push_back(static_cast<int>(L_.params.size()));
      out_.reference.push_back(pi);
      ParamLayout p = r_.nameless_[static_cast<std::size_t>(pi)];
      if (expert_group(p.group)) p.owner = rank_;  // as its pair's (keep_rooted_pairs)
      const bool owned = p.owner == rank_;
      p.storage = owned ? Storage::owned : Storage::column;
      p.updated_here = owned;
      p.grad_persistent = true;
      p.state_elems = owned ? p.numel : 0;
      // --route adamw: the owner keeps AdamW's second moment too (make_layout's lay_out).
      if (owned && !p.muon) L_.second_state_elems += p.numel;
      L_.params.push_back(std::move(p));
    }
    return first_kept;
  }

  // The kept pairs' members from reference indices to the reduced ones.
  void remap_pairs(const std::vector<int>& pair_index, int first_kept, int gi) {
    for (int pr : pair_index) {
      auto& pair = L_.pairs[static_cast<std::size_t>(pr)];
      for (int& member : pair.members) {
        const auto it = std::find(kept_.begin(), kept_.end(), member);
        member = first_kept + static_cast<int>(it - kept_.begin());
        L_.params[static_cast<std::size_t>(member)].pair = pr;
      }
    }
    for (int pr : pair_index) L_.pairs[static_cast<std::size_t>(pr)].group = gi;
  }

  bool expert_group(int g) const {
    return r_.ref_.groups[static_cast<std::size_t>(g)].comm == CommGroup::expert;
  }

  const LayoutReducer& r_;
  ReducedLayout out_;
  engine::StepLayout& L_;
  int rank_ = 0;
  const std::vector<int>* mine_ = nullptr;  // pairs rooted in this rank's column, group order
  std::size_t cursor_ = 0;                  // into *mine_
  std::vector<int> kept_;                   // reference indices of the current site's kept members
};

ReducedLayout LayoutReducer::reduce(int world_rank, ReducedLayout reuse) const {
  return Reduction(*this, world_rank, std::move(reuse)).run();
}

}  // namespace dmuon::project
