#include "dmuon/engine/step/step_volume.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <utility>

#include "dmuon/base/checked_int.hpp"

namespace dmuon::engine {
namespace {

using comm::CollectiveKind;
using plan::Repeat;
using plan::VolumeRoute;
using plan::VolumeRow;

// Weight passes per step: Z3 moves the weights before forward and again before backward, Z2
// before forward only; every micro-step of --accum K does.
std::int64_t weight_passes(const VolumeOptions& o) {
  return (o.reshard == plan::Reshard::z3 ? 2 : 1) * static_cast<std::int64_t>(o.accum);
}

// How often a row's pass runs per step.
std::int64_t passes_of(plan::Repeat r, const VolumeOptions& o) {
  switch (r) {
    case Repeat::weight_pass: return weight_passes(o);
    case Repeat::forward_pass: return o.accum;
    case Repeat::once: return 1;
  }
  return 1;
}

// The parameters by what the methods' routes tell apart (--ep: the routed experts are in
// none: at E = G their gradients are whole where they are computed, at E < G the expert
// term has them).
struct ParamClasses {
  std::vector<int> all;
  std::vector<int> sited;   // dedicated: held by a hook site (the FSDP methods' block units)
  std::vector<int> muon;    // dedicated (hooked, owner-based) and updated with Muon
  std::vector<int> others;  // not dedicated: by their route, sharded or sharded_adamw
  std::vector<int> others_sharded, others_sharded_adamw;
};

ParamClasses classify(const model::ModuleTree& tree, const plan::Plan& plan) {
  ParamClasses c;
  for (int pid : tree.parameter_order()) {
    const auto i = static_cast<std::size_t>(pid);
    if (plan.is_expert(pid)) continue;
    c.all.push_back(pid);
    if (plan.hooks.site_of_param.at(i) >= 0) {
      c.sited.push_back(pid);
      if (plan.muon(pid)) c.muon.push_back(pid);  // not --route adamw
      continue;
    }
    c.others.push_back(pid);
    (plan.route.at(i) == plan::ParamRoute::sharded_adamw ? c.others_sharded_adamw
                                                         : c.others_sharded)
        .push_back(pid);
  }
  return c;
}

// The rows of every route the method's parameters take (the table in step_volume.hpp).
std::vector<VolumeRow> route_rows(const plan::TermContext& c, const VolumeOptions& o,
                                  StepVolume& v) {
  const ParamClasses p = classify(c.tree, c.plan);
  std::vector<VolumeRow> rows;
  const auto append = [&rows](std::vector<VolumeRow> more) {
    rows.insert(rows.end(), std::make_move_iterator(more.begin()),
                std::make_move_iterator(more.end()));
  };
  // FSDP2's root unit (the parameters no site holds; dmuon: those of route fsdp, the
  // sharded_adamw ones having sites of their own) is gathered once per micro-step.
  const Repeat root = o.fsdp2 ? Repeat::forward_pass : Repeat::weight_pass;
  const auto fsdp_units = [&] {
    if (!o.fsdp2) return append(plan::sharded_term(c, p.all, VolumeRoute::sharded));
    append(plan::sharded_term(c, p.sited, VolumeRoute::sharded));
    append(plan::sharded_term(c, p.others, VolumeRoute::sharded, root));
  };
  switch (o.method) {
    case Method::dmuon:
      append(plan::owner_rows_term(c, v.owners));
      append(plan::sharded_term(c, p.others_sharded, VolumeRoute::sharded, root));
      append(plan::sharded_term(c, p.others_sharded_adamw, VolumeRoute::sharded_adamw));
      if (v.grid.tp > 1) append(plan::tp_term(c, v.tp_exchange));
      break;
    case Method::fsdp_adamw: fsdp_units(); break;
    case Method::fsdp_muon:
      fsdp_units();
      rows.push_back(plan::optimizer_gather_term(c, p.muon));
      break;
    case Method::ddp_muon: rows.push_back(plan::ddp_term(c, p.all)); break;
    case Method::ddp_dmuon:
      append(plan::owner_world_term(c, v.owners));
      rows.push_back(plan::ddp_term(c, p.others));
      break;
  }
  // --ep E < G: the experts over their expert groups, as the method treats the others.
  plan::ExpertWays ways;
  ways.owners = traits(o.method).owners;
  ways.replicas = traits(o.method).replicas;
  ways.optimizer_gather = o.method == Method::fsdp_muon;
  append(plan::expert_term(c, ways, v.expert_sites));
  return rows;
}

// An overflow of a row's bytes on rank r; an owner-based one names the largest dedicated
// parameter (CommVolume::overflow_message).
std::string overflow_message(const VolumeRow& row, std::size_t r, const plan::CommVolume& owners) {
  const char* kind = comm::collective_kind_name(row.kind);
  if (row.route == VolumeRoute::owner_rows || row.route == VolumeRoute::owner_world)
    return owners.overflow_message(kind, static_cast<int>(r));
  return fmt::format("predicted {} {} volume of rank {} per step overflows 64 bits",
                     plan::volume_route_name(row.route), kind, r);
}

void repeat_weight_passes(std::vector<VolumeRow>& rows, const VolumeOptions& o,
                          const plan::CommVolume& owners) {
  for (auto& row : rows) {
    const std::int64_t passes = passes_of(row.repeat, o);
    if (passes == 1) continue;
    auto& k = row.volume;
    for (std::size_t r = 0; r < k.bytes_per_rank.size(); ++r) {
      const auto overflow = [&] { return overflow_message(row, r, owners); };
      k.calls_per_rank[r] = checked_mul(k.calls_per_rank[r], passes, overflow);
      k.bytes_per_rank[r] = checked_mul(k.bytes_per_rank[r], passes, overflow);
    }
  }
}

// The owner-based kinds by channel; null for a channel no owner route uses.
plan::KindVolume* owner_kind(plan::CommVolume& v, CommGroup group, CollectiveKind kind) {
  const bool row = group == CommGroup::shard, column = group == CommGroup::replicate;
  if (kind == CollectiveKind::broadcast)
    return row ? &v.broadcast : column ? &v.replicate_broadcast : nullptr;
  if (kind == CollectiveKind::reduce) return row ? &v.reduce : column ? &v.reduce_stage2 : nullptr;
  return nullptr;
}

// StepVolume::owners and ::tp_exchange from the rows (after the rules).
void fill_views(StepVolume& v) {
  auto& o = v.owners;
  o.reshard = v.options.reshard;
  o.grad_reduce = v.options.grad_reduce;
  o.world = v.grid.dp_size();
  o.hooks_fired = v.hooks_fired;
  o.hooks_communicating = v.hooks_communicating;
  o.hook_sites = v.hook_sites;
  for (auto* k : {&o.broadcast, &o.reduce, &o.reduce_stage2, &o.replicate_broadcast}) {
    k->calls_per_rank.assign(static_cast<std::size_t>(o.world), 0);
    k->bytes_per_rank.assign(static_cast<std::size_t>(o.world), 0);
  }
  if (o.owned_bytes.empty()) o.owned_bytes.assign(static_cast<std::size_t>(o.world), 0);
  auto& t = v.tp_exchange;
  t.tp = v.grid.tp;
  t.world = v.grid.world();
  for (const auto& row : v.rows) {
    if (row.route == VolumeRoute::owner_rows || row.route == VolumeRoute::owner_world)
      *owner_kind(o, row.group, row.kind) = row.volume;
    if (row.route == VolumeRoute::tp)
      (row.kind == CollectiveKind::gather ? t.gather : t.scatter) = row.volume;
  }
  for (int r = 0; r < o.world; ++r) (void)o.total_bytes(r);  // throws on overflow
  if (t.tp == 1) return;
  // fsdp-adamw under TP: its optimizer is elementwise on the local shards, no TP exchange.
  const auto world = static_cast<std::size_t>(t.world);
  for (auto* k : {&t.gather, &t.scatter})
    if (k->bytes_per_rank.empty()) {
      k->calls_per_rank.assign(world, 0);
      k->bytes_per_rank.assign(world, 0);
    }
  for (auto* b : {&t.gather_received, &t.scatter_sent})
    if (b->empty()) b->assign(world, 0);
  t.dp = o;
  for (int w = 0; w < t.world; ++w) (void)t.total_bytes(w);  // throws on overflow
}

}  // namespace

VolumeOptions volume_options(const StepSpec& step) {
  VolumeOptions o;
  o.method = step.method;
  o.reshard = step.reshard;
  o.grad_reduce = step.grad_reduce;
  o.wire_bytes = static_cast<int>(kernels::dtype_bytes(step.wire));
  o.reduce_bytes = static_cast<int>(kernels::dtype_bytes(step.reduce_dtype()));
  o.accum = step.accum;
  o.clip = step.clip();
  o.fsdp2 = step.fsdp2 && step.reshard == plan::Reshard::z3;
  return o;
}

VolumeExpectation StepVolume::of_rank(int world_rank) const {
  VolumeExpectation e{};
  const int dp = grid.dp(world_rank);
  for (const auto& row : rows) {
    const int index = row.group == CommGroup::tp ? world_rank : dp;
    auto& k = e[channel_index(row.group, row.kind)];
    k.calls += row.calls(index);
    k.bytes = checked_add(k.bytes, row.bytes(index), [&] {
      return fmt::format("predicted {} volume of rank {} per step overflows 64 bits",
                         channel_name(channel_index(row.group, row.kind)), world_rank);
    });
  }
  return e;
}

KindExpectation StepVolume::max_of(plan::VolumeRoute route, CommGroup group,
                                   comm::CollectiveKind kind) const {
  KindExpectation m;
  for (int w = 0; w < grid.world(); ++w) {
    KindExpectation k;
    for (const auto& row : rows)
      if (row.route == route && row.group == group && row.kind == kind) {
        const int index = group == CommGroup::tp ? w : grid.dp(w);
        k.calls += row.calls(index);
        k.bytes += row.bytes(index);
      }
    m.calls = std::max(m.calls, k.calls);
    m.bytes = std::max(m.bytes, k.bytes);
  }
  return m;
}

StepVolume predict_step_volume(const model::ModuleTree& tree, const plan::Plan& plan,
                               const VolumeOptions& o) {
  StepVolume v;
  v.options = o;
  const auto& po = plan.partition.options;
  const bool tp = o.tp && traits(o.method).tensor_parallel && plan.tp.tp > 1;
  v.grid = RankGrid{po.replicate, po.shard, tp ? plan.tp.tp : 1, plan.config.ep};
  const int reduce_bytes = o.reduce_bytes < 0 ? o.wire_bytes : o.reduce_bytes;
  const plan::TermContext context{tree, plan, o.grad_reduce, o.wire_bytes, reduce_bytes, tp};
  v.rows = route_rows(context, o, v);
  if (o.clip) v.rows.push_back(plan::clip_term(v.grid.world()));
  repeat_weight_passes(v.rows, o, v.owners);
  v.hook_sites = static_cast<std::int64_t>(plan.hooks.sites.size()) + v.expert_sites;
  if (traits(o.method).reference_hooks) {
    const std::int64_t sites = v.hook_sites;
    v.hooks_fired = 4 * sites * o.accum;
    v.hooks_communicating = (weight_passes(o) + 1) * sites;
  }
  fill_views(v);
  return v;
}

}  // namespace dmuon::engine
