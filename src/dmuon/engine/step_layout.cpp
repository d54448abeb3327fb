#include "dmuon/engine/step_layout.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <stdexcept>

#include "dmuon/base/error.hpp"
#include "dmuon/engine/baseline_volume.hpp"

namespace dmuon::engine {

const char* storage_name(Storage s) {
  switch (s) {
    case Storage::owned: return "owned";
    case Storage::column: return "column";
    case Storage::remote: return "remote";
    case Storage::sharded: return "sharded";
    case Storage::replicated: return "replicated";
  }
  return "?";
}

std::int64_t StepLayout::weight_base(int group, int position) const {
  if (reshard == plan::Reshard::z2 || is_ddp(method))
    return groups.at(static_cast<std::size_t>(group)).own_weight_slot;
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

LayoutOptions layout_options(const EngineOptions& o, int tp_rank) {
  LayoutOptions lo;
  lo.method = o.method;
  lo.reshard = o.reshard;
  lo.prefetch = o.prefetch;
  lo.pipeline = o.pipeline;
  lo.accum = o.accum;
  lo.tp_rank = tp_rank;
  lo.wire = o.comm_dtype;
  return lo;
}

StepLayout make_layout(const model::ModuleTree& tree, const plan::Plan& plan,
                       const LayoutOptions& options, int rank) {
  StepLayout L;
  L.method = options.method;
  L.reshard = options.reshard;
  const auto& po = plan.partition.options;
  const int world = po.shard * po.replicate;
  if (rank < 0 || rank >= world)
    throw InputError(fmt::format("rank {} is outside the plan's world of {}", rank, world));
  const bool ddp = is_ddp(options.method);
  // ddp-dmuon: replicas everywhere, but each dedicated parameter has an owner (its Muon step)
  // and packs into (site, owner) pairs like dmuon's.
  const bool owners = options.method == Method::dmuon || options.method == Method::ddp_dmuon;
  L.me = ddp ? RankCoords::of(rank, world, 1) : RankCoords::of(rank, po.shard, po.replicate);
  L.tp = plan.tp.tp;
  L.tp_rank = options.tp_rank;
  L.wire = options.wire;
  L.alt_wire = options.wire == kernels::Dtype::f32 ? kernels::Dtype::bf16 : kernels::Dtype::f32;
  if (L.tp_rank < 0 || L.tp_rank >= L.tp)
    throw InputError(
        fmt::format("TP rank {} is outside the plan's TP group of {}", L.tp_rank, L.tp));
  const int G = L.me.shard;
  const Method m = options.method;
  const auto& site_of = plan.hooks.site_of_param;
  // --route sharded_adamw under dmuon: grouped at their own sites, reduce deferred.
  const auto& deferred_site_of = plan.sharded_hooks.site_of_param;
  const auto deferred = [&](int pid) {
    return m == Method::dmuon && !deferred_site_of.empty() &&
           deferred_site_of[static_cast<std::size_t>(pid)] >= 0;
  };

  std::vector<int> index_of(static_cast<std::size_t>(tree.num_parameters()), -1);
  for (int pid : tree.parameter_order()) {
    const auto& prm = tree.parameter(pid);
    ParamLayout p;
    p.pid = pid;
    p.name = prm.name;
    p.shape = matrix_shape(prm);
    p.numel = prm.numel();
    p.logical = p.shape;
    if (L.tp > 1 && plan.tp.is_sharded(pid)) {
      if (p.numel != plan.tp.local_numel[static_cast<std::size_t>(pid)])
        throw InputError(fmt::format(
            "parameter '{}' has {} elements, its TP shard {}: a TP layout is made from the local "
            "shard shapes (tp_local_tree)",
            prm.name, p.numel, plan.tp.local_numel[static_cast<std::size_t>(pid)]));
      p.tp_dim = plan.tp.shard_dim[static_cast<std::size_t>(pid)];
      p.tp_owner = plan.tp.tp_owner[static_cast<std::size_t>(pid)];
      (p.tp_dim == 0 ? p.logical.rows : p.logical.cols) *= L.tp;
    }
    const bool dedicated = site_of[static_cast<std::size_t>(pid)] >= 0;
    p.muon = dedicated && plan.muon(pid) && m != Method::fsdp_adamw;  // --route adamw: AdamW
    // --route RULE=ROUTE:DTYPE: travels in that dtype (param_route.hpp; alt arenas when it is
    // not the run's).
    const int route_bytes = plan.wire_bytes(pid, 0);
    p.wire = route_bytes == 4   ? kernels::Dtype::f32
             : route_bytes == 2 ? kernels::Dtype::bf16
                                : options.wire;
    p.alt_wire = p.wire != options.wire;
    if (ddp) {
      p.storage = Storage::replicated;
      if (owners && dedicated) p.owner = plan.partition.owner_rank(pid);
    } else if (m == Method::dmuon && dedicated) {
      p.owner = plan.partition.owner_rank(pid);
      p.storage = p.owner == rank              ? Storage::owned
                  : p.owner % G == L.me.column ? Storage::column
                                               : Storage::remote;
    } else {
      p.storage = Storage::sharded;
      p.chunk = shard_chunk(p.numel, G);
    }
    p.updated_here = p.storage == Storage::owned || p.storage == Storage::sharded ||
                     (p.storage == Storage::replicated && (p.owner < 0 || p.owner == rank));
    if (L.nan_param < 0 && dedicated) L.nan_param = static_cast<int>(L.params.size());
    index_of[static_cast<std::size_t>(pid)] = static_cast<int>(L.params.size());
    L.params.push_back(std::move(p));
  }
  if (L.nan_param < 0) L.nan_param = 0;

  // Groups in forward order: the non-dedicated parameters as one FSDP unit, then one per site.
  const GroupKind site_kind = m == Method::dmuon ? GroupKind::dmuon_site
                              : ddp              ? GroupKind::ddp
                                                 : GroupKind::fsdp;
  GroupLayout rest;
  rest.kind = ddp ? GroupKind::ddp : GroupKind::fsdp;
  for (int pid : tree.parameter_order())
    if (site_of[static_cast<std::size_t>(pid)] < 0 && !deferred(pid))
      rest.members.push_back(index_of[static_cast<std::size_t>(pid)]);
  if (!rest.members.empty()) L.groups.push_back(std::move(rest));
  // Sites in forward (module pre-order) order: the owner-based ones and, under dmuon, the
  // sharded_adamw ones (after the owner-based site of the same module).
  struct SiteRef {
    int preorder;
    bool sharded;
    const boundary::Site* site;
  };
  std::vector<SiteRef> sites;
  for (const auto& site : plan.hooks.sites)
    sites.push_back({tree.preorder_index(site.module), false, &site});
  if (m == Method::dmuon)
    for (const auto& site : plan.sharded_hooks.sites)
      sites.push_back({tree.preorder_index(site.module), true, &site});
  std::stable_sort(sites.begin(), sites.end(), [](const SiteRef& a, const SiteRef& b) {
    return a.preorder != b.preorder ? a.preorder < b.preorder : a.sharded < b.sharded;
  });
  for (const auto& ref : sites) {
    const auto& site = *ref.site;
    GroupLayout g;
    g.kind = ref.sharded ? GroupKind::fsdp : site_kind;
    g.deferred_reduce = ref.sharded;
    for (int pid : site.params) g.members.push_back(index_of[static_cast<std::size_t>(pid)]);
    const int gi = static_cast<int>(L.groups.size());
    if (ref.sharded) {
      for (int pi : g.members) L.params[static_cast<std::size_t>(pi)].group = gi;
      L.groups.push_back(std::move(g));
      continue;
    }
    if (owners) {
      // One packed buffer per owner, owners in order of first appearance in the site; --route
      // dtypes: one more per (owner, other type) (plan::packed_type_key).
      std::map<std::pair<int, bool>, int> pair_of_owner;
      for (int pi : g.members) {
        auto& p = L.params[static_cast<std::size_t>(pi)];
        auto it = pair_of_owner.find({p.owner, p.alt_wire});
        if (it == pair_of_owner.end()) {
          PairLayout pr;
          pr.group = gi;
          pr.owner = p.owner;
          pr.wire = p.wire;
          pr.alt_wire = p.alt_wire;
          pr.owner_column = p.owner % G;
          pr.owner_row = p.owner / G;
          pr.rooted_here = pr.owner_column == L.me.column || ddp;  // ddp: every replica
          pr.owned = pr.owner == rank;
          pr.grad_persistent = pr.rooted_here;
          it = pair_of_owner
                   .emplace(std::pair{p.owner, p.alt_wire}, static_cast<int>(L.pairs.size()))
                   .first;
          g.pairs.push_back(it->second);
          L.pairs.push_back(std::move(pr));
        }
        auto& pr = L.pairs[static_cast<std::size_t>(it->second)];
        p.pair = it->second;
        p.pair_offset = pr.numel;
        pr.numel += p.numel;
        pr.members.push_back(pi);
      }
    }
    for (int pi : g.members) L.params[static_cast<std::size_t>(pi)].group = gi;
    L.groups.push_back(std::move(g));
  }
  for (auto& g : L.groups)
    g.hooked = g.kind == GroupKind::dmuon_site || (g.kind == GroupKind::fsdp && m != Method::dmuon);

  // Offsets. Pairs first (their members follow the pair's packing), then plain parameters.
  for (auto& pr : L.pairs) {
    auto& g = L.groups[static_cast<std::size_t>(pr.group)];
    if (pr.alt_wire) {
      // Its own persistent regions in the alt arenas (no pool slot mixes widths).
      pr.weight_offset = take(L.alt_weight_elems, pr.numel);
      g.alt_weight_elems += pr.numel;
      pr.grad_persistent = true;
      pr.grad_offset = take(L.alt_grad_elems, pr.numel);
    } else {
      pr.weight_offset = take(g.weight_elems, pr.numel);
      pr.grad_offset =
          pr.grad_persistent ? take(L.grad_arena_elems, pr.numel) : take(g.grad_elems, pr.numel);
    }
    if (pr.rooted_here) pr.master_offset = take(L.master_elems, pr.numel);
    if (pr.owned) pr.state_offset = take(L.state_elems, pr.numel);
    for (int pi : pr.members) {
      auto& p = L.params[static_cast<std::size_t>(pi)];
      p.weight_offset = pr.weight_offset + p.pair_offset;
      if (pr.rooted_here) p.master_offset = pr.master_offset + p.pair_offset;
      if (pr.owned) {
        p.state_offset = pr.state_offset + p.pair_offset;
        p.state_elems = p.numel;
        // --route adamw: an owner-based parameter with AdamW's second moment on the owner.
        if (!p.muon) p.second_state_offset = take(L.second_state_elems, p.numel);
      }
      p.grad_persistent = pr.grad_persistent;
      p.grad_offset = pr.grad_offset + p.pair_offset;
    }
  }
  for (auto& g : L.groups) {
    for (int pi : g.members) {
      auto& p = L.params[static_cast<std::size_t>(pi)];
      if (p.pair >= 0) continue;  // laid out with its pair above
      if (p.storage == Storage::sharded) {
        const std::int64_t full = p.chunk * G;
        p.master_offset = take(L.master_elems, p.chunk);
        p.state_offset = take(L.state_elems, p.chunk);
        if (!p.muon) p.second_state_offset = take(L.second_state_elems, p.chunk);
        p.state_elems = p.chunk;
        if (p.alt_wire) {
          // Its own regions in the alt arenas.
          p.weight_offset = take(L.alt_weight_elems, full);
          g.alt_weight_elems += full;
          p.grad_persistent = true;
          p.grad_offset = take(L.alt_grad_elems, full);
          p.grad_shard_offset = take(L.alt_grad_elems, p.chunk);
        } else {
          p.weight_offset = take(g.weight_elems, full);
          // sharded_adamw: the full gradient waits for the end of backward in the grad arena.
          p.grad_persistent = g.deferred_reduce;
          p.grad_offset =
              g.deferred_reduce ? take(L.grad_arena_elems, full) : take(g.grad_elems, full);
          p.grad_shard_offset = take(L.grad_arena_elems, p.chunk);
        }
        // fsdp-muon's Nesterov inputs, in the parameter's type.
        if (p.muon && p.alt_wire) {
          p.gather_offset = take(L.alt_gather_elems, full);
          g.alt_gather_elems += full;
        } else if (p.muon) {
          p.gather_offset = take(g.gather_elems, full);
        }
      } else if (p.storage == Storage::replicated) {
        p.master_offset = take(L.master_elems, p.numel);
        p.state_offset = take(L.state_elems, p.numel);
        if (!p.muon) p.second_state_offset = take(L.second_state_elems, p.numel);
        p.state_elems = p.numel;
        p.grad_persistent = true;
        if (p.alt_wire) {
          p.weight_offset = take(L.alt_weight_elems, p.numel);
          g.alt_weight_elems += p.numel;
          p.grad_offset = take(L.alt_grad_elems, p.numel);
        } else {
          p.weight_offset = take(g.weight_elems, p.numel);
          p.grad_offset = take(L.grad_arena_elems, p.numel);
        }
      }
    }
  }

  // Pools. Windows never exceed the number of groups (a ring slot per group at most).
  const int n = static_cast<int>(L.groups.size());
  const bool own_weight_slots = L.reshard == plan::Reshard::z2 || ddp;
  L.weight_window = std::max(1, std::min(n, options.prefetch + 1));
  // --accum: gradients accumulate over the micro-steps, so every group keeps its own slot.
  L.grad_window =
      options.accum > 1 ? std::max(1, n) : std::max(1, std::min(n, options.prefetch + 2));
  L.gather_window =
      options.pipeline == OptimizerPipeline::per_group ? std::max(1, std::min(n, 2)) : 0;
  std::int64_t weights_total = 0, gathers_total = 0;
  for (auto& g : L.groups) {
    L.weight_slot_elems = std::max(L.weight_slot_elems, g.weight_elems);
    L.grad_slot_elems = std::max(L.grad_slot_elems, g.grad_elems);
    L.gather_slot_elems = std::max(L.gather_slot_elems, g.gather_elems);
    g.own_weight_slot = take(weights_total, g.weight_elems);
    g.own_gather_slot = take(gathers_total, g.gather_elems);
  }
  L.weight_pool_elems = own_weight_slots ? weights_total : L.weight_window * L.weight_slot_elems;
  L.grad_pool_elems = L.grad_window * L.grad_slot_elems;
  L.gather_pool_elems =
      L.gather_window == 0 ? gathers_total : L.gather_window * L.gather_slot_elems;
  const auto wire_bytes = static_cast<std::int64_t>(kernels::dtype_bytes(L.wire));
  const auto alt_bytes = static_cast<std::int64_t>(kernels::dtype_bytes(L.alt_wire));
  const auto bytes_of = [&](const GroupLayout& g) {
    return g.weight_elems * wire_bytes + g.alt_weight_elems * alt_bytes;
  };
  if (ddp) {
    L.live_weight_elems = 0;  // DDP computes on its replicas: nothing is packed or gathered
  } else if (own_weight_slots) {
    L.live_weight_elems = weights_total;
    for (const auto& g : L.groups) L.live_weight_bytes += bytes_of(g);
  } else {
    const std::size_t window = static_cast<std::size_t>(options.prefetch) + 1;
    for (std::size_t i = 0; i < L.groups.size(); ++i) {
      std::int64_t w = 0, b = 0;
      for (std::size_t j = i; j < std::min(L.groups.size(), i + window); ++j) {
        w += L.groups[j].weight_elems;
        b += bytes_of(L.groups[j]);
      }
      L.live_weight_elems = std::max(L.live_weight_elems, w);
      L.live_weight_bytes = std::max(L.live_weight_bytes, b);
    }
  }
  return L;
}

}  // namespace dmuon::engine
