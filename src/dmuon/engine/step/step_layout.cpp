#include "dmuon/engine/step/step_layout.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <map>
#include <stdexcept>
#include <tuple>

#include "dmuon/base/error.hpp"
#include "dmuon/engine/step/step_volume.hpp"
#include "dmuon/model/expert_local_tree.hpp"

namespace dmuon::engine {

const char* storage_name(Storage s) {
  switch (s) {
    case Storage::owned: return "owned";
    case Storage::column: return "column";
    case Storage::remote: return "remote";
    case Storage::sharded: return "sharded";
    case Storage::replicated: return "replicated";
    case Storage::expert: return "expert";
  }
  return "?";
}

std::int64_t ParamLayout::shard_len() const {
  if (!sharded()) return numel;
  return std::max<std::int64_t>(0, std::min(chunk, numel - shard_begin));
}

std::int64_t ParamLayout::shard_len_at(int member) const {
  return std::max<std::int64_t>(0, std::min(chunk, numel - member * chunk));
}

std::int64_t StepLayout::weight_base(int group, int position) const {
  const GroupLayout& g = groups.at(static_cast<std::size_t>(group));
  if (reshard == plan::Reshard::z2 || is_ddp(method) || keeps_own_slot(g)) return g.own_weight_slot;
  return static_cast<std::int64_t>(position % weight_window) * weight_slot_elems;
}

std::int64_t StepLayout::grad_base(int position) const {
  return static_cast<std::int64_t>(position % grad_window) * grad_slot_elems;
}

std::int64_t StepLayout::gather_base(int group, int position) const {
  if (gather_window == 0) return groups.at(static_cast<std::size_t>(group)).own_gather_slot;
  return static_cast<std::int64_t>(position % gather_window) * gather_slot_elems;
}

namespace {

// Appends `n` elements to an arena, returning the offset they start at.
std::int64_t take(std::int64_t& arena, std::int64_t n) {
  const std::int64_t at = arena;
  arena += n;
  return at;
}

}  // namespace

RankGrid method_grid(const plan::Plan& plan, Method method) {
  const RankGrid g = plan.grid();
  return is_ddp(method) ? RankGrid{1, g.dp_size(), g.tp, g.ep} : g;
}

namespace {

// The stages of make_layout, in order; each fills its part of the layout.
class LayoutBuilder {
 public:
  LayoutBuilder(const model::ModuleTree& tree, const plan::Plan& plan, const StepSpec& options,
                StepLayout& L)
      : tree_(tree), plan_(plan), o_(options), L_(L), t_(traits(options.method)) {}

  // Where each parameter lives and what this rank does with it.
  void place_params() {
    index_of_.assign(static_cast<std::size_t>(tree_.num_parameters()), -1);
    for (int pid : tree_.parameter_order()) {
      const int i = static_cast<int>(L_.params.size());
      index_of_[static_cast<std::size_t>(pid)] = i;
      if (L_.nan_param < 0 && dedicated(pid)) L_.nan_param = i;  // the first dedicated one
      L_.params.push_back(place(pid));
    }
    if (L_.nan_param < 0) L_.nan_param = 0;
  }

  // Groups in forward order: the non-dedicated parameters as one unit, then one per site
  // (module pre-order; a sharded_adamw site after the owner-based site of the same module).
  void group_params() {
    GroupLayout rest;
    rest.kind = t_.replicas ? GroupKind::ddp : GroupKind::fsdp;
    rest.root_unit = rest.kind == GroupKind::fsdp;
    for (int pid : tree_.parameter_order())
      if (!dedicated(pid) && !deferred(pid) && !plan_.is_expert(pid))
        rest.members.push_back(index_of_[static_cast<std::size_t>(pid)]);
    if (!rest.members.empty()) add_group(std::move(rest));
    for (const auto& ref : sites_in_forward_order()) {
      GroupLayout g;
      g.kind = ref.kind;
      g.deferred_reduce = ref.kind == GroupKind::fsdp && ref.sharded;
      g.comm = ref.comm;
      for (int pid : *ref.params) g.members.push_back(index_of_[static_cast<std::size_t>(pid)]);
      const int gi = static_cast<int>(L_.groups.size());
      if (g.kind == site_kind() && !ref.sharded && ref.owners && t_.owners) pack_pairs(g, gi);
      add_group(std::move(g));
    }
    for (auto& g : L_.groups)
      g.hooked = g.kind == GroupKind::dmuon_site ||
                 (g.kind == GroupKind::fsdp && o_.method != Method::dmuon);
  }

  // Offsets in the arenas and the groups' slots: pairs first (their members follow the
  // pair's packing), then the parameters laid out alone.
  void lay_out_buffers() {
    for (auto& pr : L_.pairs) lay_out(pr);
    for (auto& g : L_.groups)
      for (int pi : g.members) {
        auto& p = L_.params[static_cast<std::size_t>(pi)];
        if (p.pair >= 0) continue;
        if (p.sharded())
          lay_out_sharded(p, g);
        else if (p.storage == Storage::replicated || p.storage == Storage::expert)
          lay_out_replica(p, g);
      }
  }

  // --tp: the exchange buffers of the TP-sharded parameters this rank updates.
  void lay_out_tp() {
    for (const auto& p : L_.params) {
      if (!p.tp_sharded() || !p.updated_here || !p.muon) continue;
      L_.tp_chunk_elems = std::max(L_.tp_chunk_elems, p.numel);
      L_.tp_root = L_.tp_root || p.tp_owner == L_.tp_rank();
    }
  }

  // The activation work's anchor groups (activation_work.hpp): a block's, the last group in
  // forward order holding one of its parameters; the stem's the first, the head's the last.
  void place_activation() {
    if (!o_.activation || L_.groups.empty()) return;
    L_.activation = o_.activation;
    const auto& units = o_.activation->units;
    std::vector<int> unit_of_module(tree_.num_modules(), -1);
    for (std::size_t u = 0; u < units.size(); ++u)
      if (units[u].module >= 0)
        unit_of_module[static_cast<std::size_t>(units[u].module)] = static_cast<int>(u);
    std::vector<int> anchor(units.size(), -1);
    for (const auto& p : L_.params)
      for (int m = tree_.parameter(p.pid).holders.front().module; m >= 0;
           m = tree_.module(m).parent)
        if (const int u = unit_of_module[static_cast<std::size_t>(m)]; u >= 0) {
          anchor[static_cast<std::size_t>(u)] =
              std::max(anchor[static_cast<std::size_t>(u)], p.group);
          break;
        }
    const int last = static_cast<int>(L_.groups.size()) - 1;
    int previous = 0;
    for (std::size_t u = 0; u < units.size(); ++u) {
      int& a = anchor[u];
      if (units[u].head)
        a = last;
      else if (a < 0)
        a = previous;  // the stem, or a block without parameters
      previous = a;
    }
    L_.activation_group = std::move(anchor);
  }

  // Pool windows and slots (never more slots than groups), and the live-weight peak.
  void size_pools() {
    const int n = static_cast<int>(L_.groups.size());
    const bool own_weight_slots = L_.reshard == plan::Reshard::z2 || t_.replicas;
    L_.weight_window = std::max(1, std::min(n, o_.prefetch + 1));
    // --accum: gradients accumulate over the micro-steps, so every group keeps its own slot.
    // The reference's DMuon: one site's gradients reducing while the next site's are written.
    const int ring = o_.reference_dmuon() ? 2 : o_.prefetch + 2;
    L_.grad_window = o_.accum > 1 ? std::max(1, n) : std::max(1, std::min(n, ring));
    L_.gather_window =
        o_.pipeline == OptimizerPipeline::per_group ? std::max(1, std::min(n, 2)) : 0;
    std::int64_t weights_total = 0, gathers_total = 0;
    for (auto& g : L_.groups) {
      if (!L_.keeps_own_slot(g))
        L_.weight_slot_elems = std::max(L_.weight_slot_elems, g.weight_elems);
      L_.grad_slot_elems = std::max(L_.grad_slot_elems, g.grad_elems);
      L_.gather_slot_elems = std::max(L_.gather_slot_elems, g.gather_elems);
      g.own_weight_slot = take(weights_total, g.weight_elems);
      g.own_gather_slot = take(gathers_total, g.gather_elems);
    }
    L_.weight_pool_elems =
        own_weight_slots ? weights_total : L_.weight_window * L_.weight_slot_elems;
    // Z3: a group that stays gathered (or an EP rank's experts, a compute copy of its own
    // masters) holds its own slot after the ring for the whole step.
    for (auto& g : L_.groups)
      if (!own_weight_slots && L_.keeps_own_slot(g))
        g.own_weight_slot = take(L_.weight_pool_elems, g.weight_elems);
    L_.grad_pool_elems = L_.grad_window * L_.grad_slot_elems;
    L_.gather_pool_elems =
        L_.gather_window == 0 ? gathers_total : L_.gather_window * L_.gather_slot_elems;
    live_weights(own_weight_slots, weights_total);
  }

 private:
  // A group after the root unit: a hook site, a sharded_adamw site or (--ep) the routed
  // experts of one container.
  struct SiteRef {
    int preorder;
    int rank;  // at one module: the owner-based site, its sharded_adamw site, its experts
    GroupKind kind;
    bool sharded;
    const std::vector<int>* params;
    CommGroup comm = CommGroup::shard;
    bool owners = true;  // its members have owners (packed pairs under an owner-based method)
  };

  bool dedicated(int pid) const {
    return plan_.hooks.site_of_param[static_cast<std::size_t>(pid)] >= 0;
  }
  // dmuon, --route sharded_adamw: grouped at their own sites, reduce deferred.
  bool deferred(int pid) const {
    const auto& site_of = plan_.sharded_hooks.site_of_param;
    return o_.method == Method::dmuon && !site_of.empty() &&
           site_of[static_cast<std::size_t>(pid)] >= 0;
  }
  GroupKind site_kind() const {
    return t_.replicas ? GroupKind::ddp : t_.owners ? GroupKind::dmuon_site : GroupKind::fsdp;
  }
  int rank() const { return L_.me.dp(); }
  int shards() const { return L_.shards(); }

  ParamLayout place(int pid) const {
    const auto& prm = tree_.parameter(pid);
    ParamLayout p;
    p.pid = pid;
    p.name = prm.name;
    p.shape = matrix_shape(prm);
    p.numel = prm.numel();
    p.logical = p.shape;
    if (L_.tp() > 1 && plan_.tp.is_sharded(pid)) place_tp(p);
    place_data(p);
    const bool ded = dedicated(pid);
    p.muon = ded && plan_.muon(pid) && t_.muon;  // --route adamw: AdamW
    // --route RULE=ROUTE:DTYPE: weights and gradients travel in that dtype (alt arenas where
    // it is not the run's wire or reduce type).
    const int route_bytes = plan_.wire_bytes(pid, 0);
    const auto route_or = [route_bytes](kernels::Dtype run) {
      return route_bytes == 4 ? kernels::Dtype::f32 : route_bytes == 2 ? kernels::Dtype::bf16 : run;
    };
    p.wire = route_or(o_.wire);
    p.grad_wire = route_or(o_.reduce_dtype());
    p.alt_wire = p.wire != o_.wire;
    p.alt_grad = p.grad_wire != o_.reduce_dtype();
    if (plan_.is_expert(pid) && plan_.expert_replicas() == 1) {
      p.storage = Storage::expert;  // its route decides the optimizer, not the dedication
      p.muon = plan_.muon(pid) && t_.muon;
    } else if (plan_.is_expert(pid)) {
      place_shared_expert(p);
    } else if (t_.replicas) {
      p.storage = Storage::replicated;
      if (t_.owners && ded) p.owner = plan_.partition.owner_rank(pid);
    } else if (t_.owners && ded) {
      p.owner = plan_.partition.owner_rank(pid);
      p.storage = p.owner == rank()                      ? Storage::owned
                  : p.owner % shards() == L_.me.column() ? Storage::column
                                                         : Storage::remote;
    } else {
      p.storage = Storage::sharded;
      p.chunk = shard_chunk(p.numel, shards());
      p.padded = p.chunk * shards();
      p.shard_begin = L_.me.column() * p.chunk;
    }
    p.updated_here = p.storage == Storage::owned || p.storage == Storage::sharded ||
                     p.storage == Storage::expert ||
                     (p.storage == Storage::replicated && (p.owner < 0 || p.owner == rank()));
    return p;
  }

  // --ep E < G: a routed expert's parameter, held by the G/E ranks of this rank's expert
  // group as the row holds a dense one (its route decides the optimizer, as at E = G): owned
  // by one of them (an owner-based route under an owner-based method), else sharded over
  // them, or (DDP) replicated on each.
  void place_shared_expert(ParamLayout& p) const {
    p.muon = plan_.muon(p.pid) && t_.muon;
    const int slot = plan_.expert_owner(p.pid);
    const int n = plan_.expert_replicas();
    const int owner =
        slot < 0 ? -1
                 : L_.me.grid.rank_of(CommGroup::expert,
                                      L_.me.grid.instance(L_.me.rank, CommGroup::expert), slot);
    if (t_.replicas) {
      p.storage = Storage::replicated;
      if (t_.owners) p.owner = owner;
    } else if (t_.owners && owner >= 0) {
      p.owner = owner;
      p.storage = owner == L_.me.rank ? Storage::owned : Storage::remote;
    } else {
      p.storage = Storage::sharded;
      p.chunk = shard_chunk(p.numel, n);
      p.padded = p.chunk * n;
      p.shard_begin = L_.me.expert_replica() * p.chunk;
    }
  }

  void place_data(ParamLayout& p) const {
    const bool expert = plan_.is_expert(p.pid);
    p.data_key = p.tp_sharded() ? tp_shard_key(p.pid, L_.tp_rank())
                 : expert
                     ? expert_data_key(model::global_parameter_name(tree_, p.pid, L_.me.ep_rank()))
                     : static_cast<std::uint64_t>(p.pid);
    // An expert trains on the samples routed to it from its EP group: with E < G each of
    // the G/E groups sees its own share of them.
    p.data_rank = expert ? L_.me.expert_replica() : rank();
    p.data_ranks = expert ? plan_.expert_replicas() : L_.me.grid.dp_size();
  }

  void place_tp(ParamLayout& p) const {
    const auto i = static_cast<std::size_t>(p.pid);
    if (p.numel != plan_.tp.local_numel[i])
      throw InputError(fmt::format(
          "parameter '{}' has {} elements, its TP shard {}: a TP layout is made from the local "
          "shard shapes (plan::tp_local_tree)",
          p.name, p.numel, plan_.tp.local_numel[i]));
    p.tp_dim = plan_.tp.shard_dim[i];
    p.tp_owner = plan_.tp.tp_owner[i];
    (p.tp_dim == 0 ? p.logical.rows : p.logical.cols) *= L_.tp();
  }

  std::vector<SiteRef> sites_in_forward_order() {
    std::vector<SiteRef> sites;
    for (const auto& site : plan_.hooks.sites)
      sites.push_back({tree_.preorder_index(site.module), 0, site_kind(), false, &site.params});
    if (o_.method == Method::dmuon)
      for (const auto& site : plan_.sharded_hooks.sites)
        sites.push_back(
            {tree_.preorder_index(site.module), 1, GroupKind::fsdp, true, &site.params});
    expert_groups_.clear();
    if (!plan_.expert.empty())
      for (int c : model::expert_containers(tree_)) add_expert_sites(c, sites);
    std::stable_sort(sites.begin(), sites.end(), [](const SiteRef& a, const SiteRef& b) {
      return a.preorder != b.preorder ? a.preorder < b.preorder : a.rank < b.rank;
    });
    return sites;
  }

  // --ep: the groups of container c's experts. E = G: one, this rank's alone. E < G, on the
  // expert group: those with owners (an owner-based method's owner-based routes) as a site,
  // the others as an FSDP unit (DDP: replicas).
  void add_expert_sites(int c, std::vector<SiteRef>& sites) {
    std::vector<int> owned, rest;
    for (int pid : tree_.parameter_order())
      if (plan_.is_expert(pid) && model::expert_slot(tree_, pid).container == c)
        (plan_.expert_replicas() > 1 && t_.owners && plan_.expert_owner(pid) >= 0 ? owned : rest)
            .push_back(pid);
    const int at = tree_.preorder_index(c);
    if (plan_.expert_replicas() == 1) {
      if (!rest.empty())
        sites.push_back({at, 2, GroupKind::expert, false,
                         &expert_groups_.emplace_back(std::move(rest)), CommGroup::shard, false});
      return;
    }
    if (!owned.empty())
      sites.push_back({at, 2, site_kind(), false, &expert_groups_.emplace_back(std::move(owned)),
                       CommGroup::expert, true});
    if (!rest.empty())
      sites.push_back({at, 3, t_.replicas ? GroupKind::ddp : GroupKind::fsdp, false,
                       &expert_groups_.emplace_back(std::move(rest)), CommGroup::expert, false});
  }

  void add_group(GroupLayout&& g) {
    const int gi = static_cast<int>(L_.groups.size());
    for (int pi : g.members) L_.params[static_cast<std::size_t>(pi)].group = gi;
    L_.groups.push_back(std::move(g));
  }

  // One packed buffer per owner, owners in order of first appearance in the site; --route
  // dtypes: one more per (owner, other types) (plan::packed_type_key).
  void pack_pairs(GroupLayout& g, int gi) {
    std::map<std::tuple<int, bool, bool>, int> pair_of_owner;
    for (int pi : g.members) {
      auto& p = L_.params[static_cast<std::size_t>(pi)];
      const auto key = std::tuple{p.owner, p.alt_wire, p.alt_grad};
      auto it = pair_of_owner.find(key);
      if (it == pair_of_owner.end()) {
        it = pair_of_owner.emplace(key, static_cast<int>(L_.pairs.size())).first;
        g.pairs.push_back(it->second);
        L_.pairs.push_back(new_pair(gi, g.comm, p));
      }
      auto& pr = L_.pairs[static_cast<std::size_t>(it->second)];
      p.pair = it->second;
      p.pair_offset = pr.numel;
      pr.numel += p.numel;
      pr.members.push_back(pi);
    }
  }

  PairLayout new_pair(int gi, CommGroup comm, const ParamLayout& p) const {
    PairLayout pr;
    pr.group = gi;
    pr.owner = p.owner;
    pr.wire = p.wire;
    pr.grad_wire = p.grad_wire;
    pr.alt_wire = p.alt_wire;
    pr.alt_grad = p.alt_grad;
    // p.owner is a DP rank (T = 1 under --ep: a world rank too).
    pr.owner_column =
        comm == CommGroup::expert ? L_.me.grid.member(p.owner, comm) : p.owner % shards();
    pr.owner_row = p.owner / shards();
    pr.rooted_here =
        (comm == CommGroup::expert ? p.owner == L_.me.rank : pr.owner_column == L_.me.column()) ||
        t_.replicas;  // ddp: every replica
    pr.owned = pr.owner == rank();
    pr.grad_persistent = pr.rooted_here;
    return pr;
  }

  void lay_out(PairLayout& pr) {
    auto& g = L_.groups[static_cast<std::size_t>(pr.group)];
    // A --route dtype other than the run's: its own persistent region of the alt arena (no
    // pool slot mixes widths).
    if (pr.alt_wire) {
      pr.weight_offset = take(L_.alt_weight_elems, pr.numel);
      g.alt_weight_elems += pr.numel;
    } else {
      pr.weight_offset = take(g.weight_elems, pr.numel);
    }
    if (pr.alt_grad) {
      pr.grad_persistent = true;
      pr.grad_offset = take(L_.alt_grad_elems, pr.numel);
    } else {
      pr.grad_offset =
          pr.grad_persistent ? take(L_.grad_arena_elems, pr.numel) : take(g.grad_elems, pr.numel);
    }
    if (pr.rooted_here) pr.master_offset = take(L_.master_elems, pr.numel);
    if (pr.owned) pr.state_offset = take(L_.state_elems, pr.numel);
    for (int pi : pr.members) {
      auto& p = L_.params[static_cast<std::size_t>(pi)];
      p.weight_offset = pr.weight_offset + p.pair_offset;
      if (pr.rooted_here) p.master_offset = pr.master_offset + p.pair_offset;
      if (pr.owned) {
        p.state_offset = pr.state_offset + p.pair_offset;
        p.state_elems = p.numel;
        // --route adamw: an owner-based parameter with AdamW's second moment on the owner.
        if (!p.muon) p.second_state_offset = take(L_.second_state_elems, p.numel);
      }
      p.grad_persistent = pr.grad_persistent;
      p.grad_offset = pr.grad_offset + p.pair_offset;
    }
  }

  void lay_out_state(ParamLayout& p, std::int64_t n) {
    p.master_offset = take(L_.master_elems, n);
    p.state_offset = take(L_.state_elems, n);
    if (!p.muon) p.second_state_offset = take(L_.second_state_elems, n);
    p.state_elems = n;
  }

  void lay_out_sharded(ParamLayout& p, GroupLayout& g) {
    lay_out_state(p, p.chunk);
    if (p.alt_wire) {  // its own region in the alt weight arena
      p.weight_offset = take(L_.alt_weight_elems, p.padded);
      g.alt_weight_elems += p.padded;
    } else {
      p.weight_offset = take(g.weight_elems, p.padded);
    }
    if (p.alt_grad) {  // its own regions in the alt grad arena
      p.grad_persistent = true;
      p.grad_offset = take(L_.alt_grad_elems, p.padded);
      p.grad_shard_offset = take(L_.alt_grad_elems, p.chunk);
    } else {
      // sharded_adamw: the full gradient waits for the end of backward in the grad arena.
      p.grad_persistent = g.deferred_reduce;
      p.grad_offset =
          g.deferred_reduce ? take(L_.grad_arena_elems, p.padded) : take(g.grad_elems, p.padded);
      p.grad_shard_offset = take(L_.grad_arena_elems, p.chunk);
    }
    // fsdp-muon's Nesterov inputs, in the type its weights travel in.
    if (p.muon && p.alt_wire) {
      p.gather_offset = take(L_.alt_gather_elems, p.padded);
      g.alt_gather_elems += p.padded;
    } else if (p.muon) {
      p.gather_offset = take(g.gather_elems, p.padded);
    }
  }

  void lay_out_replica(ParamLayout& p, GroupLayout& g) {
    lay_out_state(p, p.numel);
    p.grad_persistent = true;
    if (p.alt_wire) {
      p.weight_offset = take(L_.alt_weight_elems, p.numel);
      g.alt_weight_elems += p.numel;
    } else {
      p.weight_offset = take(g.weight_elems, p.numel);
    }
    p.grad_offset =
        p.alt_grad ? take(L_.alt_grad_elems, p.numel) : take(L_.grad_arena_elems, p.numel);
  }

  // Peak weight buffers a real implementation holds live (Z3: the groups in flight
  // together; Z2: all), in elements and in bytes (each group's in its own types).
  void live_weights(bool own_weight_slots, std::int64_t weights_total) {
    const auto wire_bytes = static_cast<std::int64_t>(kernels::dtype_bytes(L_.wire));
    const auto alt_bytes = static_cast<std::int64_t>(kernels::dtype_bytes(L_.alt_wire));
    const auto bytes_of = [&](const GroupLayout& g) {
      return g.weight_elems * wire_bytes + g.alt_weight_elems * alt_bytes;
    };
    if (t_.replicas) return;  // DDP computes on its replicas: nothing packed or gathered
    if (own_weight_slots) {
      L_.live_weight_elems = weights_total;
      for (const auto& g : L_.groups) L_.live_weight_bytes += bytes_of(g);
      return;
    }
    // Z3: at forward position i the groups i .. i + prefetch, every earlier group that stays
    // gathered (the root unit, from its forward to its backward) and, the whole step, the
    // compute copies of an EP rank's experts.
    const std::size_t window = static_cast<std::size_t>(o_.prefetch) + 1;
    std::int64_t kept_w = 0, kept_b = 0;
    for (const auto& g : L_.groups)
      if (g.kind == GroupKind::expert) {
        kept_w += g.weight_elems;
        kept_b += bytes_of(g);
      }
    for (std::size_t i = 0; i < L_.groups.size(); ++i) {
      std::int64_t w = kept_w, b = kept_b;
      for (std::size_t j = i; j < std::min(L_.groups.size(), i + window); ++j) {
        if (L_.groups[j].kind == GroupKind::expert) continue;
        w += L_.groups[j].weight_elems;
        b += bytes_of(L_.groups[j]);
      }
      L_.live_weight_elems = std::max(L_.live_weight_elems, w);
      L_.live_weight_bytes = std::max(L_.live_weight_bytes, b);
      if (L_.stays_gathered(L_.groups[i])) {
        kept_w += L_.groups[i].weight_elems;
        kept_b += bytes_of(L_.groups[i]);
      }
    }
  }

  const model::ModuleTree& tree_;
  const plan::Plan& plan_;
  const StepSpec& o_;
  StepLayout& L_;
  MethodTraits t_;
  std::vector<int> index_of_;                   // per parameter id: its index in L_.params
  std::deque<std::vector<int>> expert_groups_;  // --ep: each container's experts (stable)
};

}  // namespace

StepLayout make_layout(const model::ModuleTree& tree, const plan::Plan& plan,
                       const StepSpec& options, int rank) {
  StepLayout L;
  L.method = options.method;
  L.reshard = options.reshard;
  const RankGrid grid = method_grid(plan, options.method);
  grid.require_rank(rank);
  L.me = GridRank{grid, rank};
  L.wire = options.wire;  // the spec's: the arenas' types
  L.alt_wire = options.wire == kernels::Dtype::f32 ? kernels::Dtype::bf16 : kernels::Dtype::f32;
  L.reduce = options.reduce_dtype();
  // With --accum every group keeps its gradients until the last micro-step: the engine's own
  // slots, not FSDP2's one reduce input.
  L.fsdp2 = options.fsdp2 && options.accum == 1;
  // FSDP2's root unit stays gathered in every micro-step, --accum or not (it reshards after
  // its backward: post_backward).
  L.fsdp2_root = options.fsdp2 && options.reshard == plan::Reshard::z3;
  L.alt_reduce = L.reduce == kernels::Dtype::f32 ? kernels::Dtype::bf16 : kernels::Dtype::f32;
  L.reference_memory = options.reference_dmuon();
  L.param = options.param;
  L.momentum = L.reference_memory && options.momentum == MomentumDtype::grad ? L.reduce : L.param;
  L.coalesced_clip = options.clip();
  LayoutBuilder b(tree, plan, options, L);
  b.place_params();
  b.group_params();
  b.lay_out_buffers();
  b.lay_out_tp();
  b.place_activation();
  b.size_pools();
  return L;
}

}  // namespace dmuon::engine
