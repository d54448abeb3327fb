#include "inspect/inspection.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>

#include "advise/scale_advice.hpp"
#include "common/plan_setup.hpp"
#include "dmuon/base/abbreviate.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/boundary/tp_shard.hpp"
#include "dmuon/config/config_file.hpp"
#include "dmuon/engine/step/accumulation.hpp"
#include "dmuon/model/expert_local_tree.hpp"
#include "dmuon/plan/plan_json.hpp"
#include "dmuon/plan/tp_json.hpp"
#include "options/option.hpp"
#include "options/run_option_outputs.hpp"

namespace dmuon::apps::inspect {
namespace {

using comm::CollectiveKind;

double mb(std::int64_t bytes) {
  return static_cast<double>(bytes) / 1e6;
}

engine::VolumeOptions volume_options(const InspectArgs& a, engine::Method method,
                                     plan::Reshard reshard) {
  engine::VolumeOptions o;
  o.method = method;
  o.reshard = reshard;
  o.grad_reduce = a.grad_reduce;
  o.wire_bytes = 0;  // each parameter's dtype (dmuon_bench: --comm-dtype)
  o.accum = a.accum;
  o.clip = a.clip > 0;
  return o;
}

Mode resolve_mode(const model::Topology& topo, const InspectArgs& a, plan::Reshard reshard) {
  Mode m;
  m.reshard = reshard;
  RunOptions o = *a.options;
  o.engine.step.reshard = reshard;
  m.plan = plan::make_plan(
      topo.tree, make_plan_config(o, topo, a.world_size, a.boundary, a.strict, a.strategy));
  // Per DP rank, on the local shards each rank holds (the full parameters when T = 1).
  m.volume = engine::predict_step_volume(topo.tree, *m.plan,
                                         volume_options(a, engine::Method::dmuon, reshard));
  return m;
}

// --route sharded_adamw: its parameters, sites and per-rank collectives in one mode.
struct ShardedAdamw {
  std::int64_t params = 0, elements = 0, sites = 0;
  engine::KindExpectation all_gather, reduce_scatter, all_reduce;
};

ShardedAdamw sharded_adamw(const model::ModuleTree& tree, const Mode& m) {
  ShardedAdamw s;
  for (int pid : tree.parameter_order())
    if (m.plan->route.at(static_cast<std::size_t>(pid)) == plan::ParamRoute::sharded_adamw) {
      ++s.params;
      s.elements += tree.parameter(pid).numel();
    }
  s.sites = static_cast<std::int64_t>(m.plan->sharded_hooks.sites.size());
  constexpr auto route = plan::VolumeRoute::sharded_adamw;
  s.all_gather = m.volume.max_of(route, CommGroup::shard, CollectiveKind::all_gather);
  s.reduce_scatter = m.volume.max_of(route, CommGroup::shard, CollectiveKind::reduce_scatter);
  s.all_reduce = m.volume.max_of(route, CommGroup::replicate, CollectiveKind::all_reduce);
  return s;
}

// --clip-norm: the bytes of its one world all_reduce of one fp32 under the counter convention
// (floor(1·(N−1)/N)·4 = 0: a one-element all-reduce moves no chunk).
std::int64_t clip_bytes(const Mode& m) {
  return m.volume.max_of(plan::VolumeRoute::clip, CommGroup::world, CollectiveKind::all_reduce)
      .bytes;
}

// Tensor parallelism: the TP owners and the per-world-rank volume with the TP gather/scatter.
void print_tp(const model::Topology& topo, const plan::Plan& p, const Modes& modes,
              std::size_t max_rows) {
  const auto& t = p.tp;
  const auto& part = p.partition;
  fmt::print(
      "#\n# tensor parallelism: T {}, {} TP-sharded parameters (never packed; rank = dp_rank x "
      "T + tp)\n",
      t.tp, t.sharded.size());
  fmt::print("# {:>5}  {:<44} {:>6} {:>14} {:>14} {:>8} {:>8} {:>5}\n", "visit", "parameter", "par",
             "shape", "local", "dp_owner", "tp_owner", "rank");
  for (std::size_t i = 0; i < t.visit_order.size(); ++i) {
    if (i == max_rows) {
      fmt::print("  ... {} more TP-sharded parameters (--json for all)\n",
                 t.visit_order.size() - max_rows);
      break;
    }
    const int pid = t.visit_order[i];
    const auto& prm = topo.tree.parameter(pid);
    const int dim = t.shard_dim[static_cast<std::size_t>(pid)];
    const auto local = boundary::tp_local_shape(prm.shape, dim, t.tp);
    fmt::print("  {:>5}  {:<44} {:>6} {:>14} {:>14} {:>8} {:>8} {:>5}\n", i,
               abbreviate_value(prm.name, 44), dim == 1 ? "row" : "column",
               fmt::format("{}", fmt::join(prm.shape, "x")),
               fmt::format("{}", fmt::join(local, "x")), part.owner_rank(pid),
               t.tp_owner[static_cast<std::size_t>(pid)], t.owner_world_rank(part, pid));
  }
  fmt::print(
      "#\n# predicted DMuon communication per step with TP (max over the {} ranks; DP "
      "collectives on local shards, TP gather of gradients + TP scatter of fp32 updates)\n",
      p.grid().world());
  fmt::print("# {:>7} {:>10} {:>10} {:>12} {:>12} {:>12}\n", "reshard", "gathers", "scatters",
             "gather MB", "scatter MB", "MB/rank");
  for (const auto& m : modes) {
    if (!m.valid()) {
      fmt::print("  {:>7} not valid: {}\n", m.name(), m.error);
      continue;
    }
    const auto& v = m.volume.tp_exchange;
    fmt::print("  {:>7} {:>10} {:>10} {:>12.3f} {:>12.3f} {:>12.3f}\n", m.name(),
               v.gather.max_calls(), v.scatter.max_calls(), mb(v.gather.max_bytes()),
               mb(v.scatter.max_bytes()), mb(v.max_bytes_per_rank()));
  }
}

// The first lines: the model, the rules, the routes and the world.
void print_summary(const model::Topology& topo, const plan::Plan& p) {
  const auto& tree = topo.tree;
  const auto& part = p.partition;
  std::int64_t ded_numel = 0, ded_bytes = 0;  // site sums are checked: so are theirs
  for (const auto& s : p.hooks.sites) {
    ded_numel += s.numel;
    ded_bytes += s.bytes;
  }
  fmt::print(
      "# dmuon_inspect  topology {} ({}): {} modules, {} parameters, {} dedicated "
      "({:.3f} M elements, {:.3f} MB)\n",
      topo.name, topo.preset.empty() ? "file" : topo.preset, tree.num_modules(),
      tree.num_parameters(), p.hooks.dedicated.size(), static_cast<double>(ded_numel) / 1e6,
      mb(ded_bytes));
  fmt::print("# dedicate {}   boundary {}   sites for reshard {}\n",
             abbreviate_value(p.rule.spec()), abbreviate_value(p.policy.label()),
             plan::reshard_name(p.config.reshard));
  if (!p.config.routes.empty()) {
    // Parameters and elements per route: owner-based (muon, adamw) vs sharded (fsdp,
    // sharded_adamw).
    std::array<std::int64_t, 4> count{}, numel{};
    for (int pid : tree.parameter_order()) {
      const auto r = static_cast<std::size_t>(p.route.at(static_cast<std::size_t>(pid)));
      ++count[r];
      numel[r] += tree.parameter(pid).numel();
    }
    std::string line;
    for (auto r : {plan::ParamRoute::muon, plan::ParamRoute::adamw, plan::ParamRoute::fsdp,
                   plan::ParamRoute::sharded_adamw}) {
      const auto i = static_cast<std::size_t>(r);
      line += fmt::format("   {} {} ({} elements)", plan::route_name(r), count[i], numel[i]);
    }
    fmt::print("# routes {}:{}\n", abbreviate_value(plan::routes_text(p.config.routes)), line);
  }
  fmt::print("# world {} = R {} x G {} x T {}   owner strategy {}, cost model {}, packing {}\n",
             part.slots.size() * static_cast<std::size_t>(p.tp.tp), part.options.replicate,
             part.options.shard, p.tp.tp, partition::strategy_name(part.options.strategy),
             partition::cost_model_name(part.options.cost_model),
             partition::packing_text(part.options));
}

// --ep: what each rank holds of the routed experts, outside the owners and the sites.
void print_expert_parallel(const model::Topology& topo, const plan::Plan& p) {
  if (p.config.ep == 1) return;
  const auto& tree = topo.tree;
  std::int64_t count = 0, numel = 0, muon = 0;
  for (int pid : tree.parameter_order())
    if (p.is_expert(pid)) {
      ++count;
      numel += tree.parameter(pid).numel();
      muon += p.muon(pid) ? 1 : 0;
    }
  const auto containers = model::expert_containers(tree);
  const auto& first = tree.module(containers.front());
  const int n = p.expert_replicas();
  fmt::print(
      "# expert parallelism --ep {}: each rank holds {} of the {} routed experts of each of {} "
      "layers ({} parameters, {:.3f} M elements; {} Muon, {} AdamW), {}\n",
      p.config.ep, first.children.size(),
      first.children.size() * static_cast<std::size_t>(first.ep_size), containers.size(), count,
      static_cast<double>(numel) / 1e6, muon, count - muon,
      n == 1 ? "whole, updated where they are, with no collective: outside the owners and the "
               "hook sites below"
             : fmt::format(
                   "shared by an expert group of G/E = {} ranks (the columns equal mod "
                   "{}): owned there by DMuon (the slots' loads below), FSDP-sharded over it by "
                   "the FSDP methods, replicated by DDP",
                   n, p.config.ep));
  if (n == 1 || p.expert_partition.slots.empty()) return;
  const auto& part = p.expert_partition;
  std::string loads;
  for (std::size_t j = 0; j < part.numel_loads.size(); ++j)
    loads +=
        fmt::format("{}{:.3f}", j ? " / " : "", static_cast<double>(part.numel_loads[j]) / 1e6);
  fmt::print(
      "# expert owners per slot of a group (M elements): {}  (ratio {:.3f} to the lower bound)\n",
      loads, part.ratio);
}

void print_sites(const plan::Plan& p, std::size_t max_rows) {
  const auto& hooks = p.hooks;
  const bool z3_sites = p.config.reshard == plan::Reshard::z3;
  fmt::print("#\n# hook sites: {}   (forward order; broadcasts/step are {}: {} per owner{})\n",
             hooks.sites.size(), z3_sites ? "Z3" : "Z2", z3_sites ? 2 : 1,
             p.has_route_dtypes() ? " and --route dtype" : "");
  fmt::print("# {:>4}  {:<40} {:<22} {:>6} {:>10} {:>9} {:>6} {:>8}  {}\n", "site", "path", "type",
             "params", "numel", "MB", "owners", "bcast", "reason");
  for (std::size_t i = 0; i < hooks.sites.size(); ++i) {
    if (i == max_rows) {
      fmt::print("  ... {} more sites (--max-rows to show more, --json for all)\n",
                 hooks.sites.size() - max_rows);
      break;
    }
    const auto& s = hooks.sites[i];
    const auto owners = plan::site_owner_ranks(s, p.partition);
    fmt::print("  {:>4}  {:<40} {:<22} {:>6} {:>10} {:>9.3f} {:>6} {:>8}  {}\n", i,
               s.path.empty() ? "<root>" : s.path, s.type, s.params.size(), s.numel, mb(s.bytes),
               owners.size(), (z3_sites ? 2 : 1) * plan::site_packed_buffers(s, p),
               boundary::site_reason_name(hooks.reason[s.params.front()]));
  }
}

void print_owners(const partition::Partition& part, std::size_t max_rows) {
  fmt::print("#\n# owners per slot\n# {:>5} {:>5} {:>5} {:>5} {:>6} {:>12} {:>10}\n", "slot",
             "shard", "rep", "rank", "units", "numel", "cost");
  std::vector<int> units_per_slot(part.slots.size(), 0);
  for (int s : part.unit_slot) ++units_per_slot[s];
  for (std::size_t s = 0; s < part.slots.size(); ++s) {
    if (s == max_rows) {
      fmt::print("  ... {} more slots\n", part.slots.size() - max_rows);
      break;
    }
    fmt::print("  {:>5} {:>5} {:>5} {:>5} {:>6} {:>12} {:>10}\n", s, part.slots[s].shard,
               part.slots[s].replicate, part.slots[s].rank, units_per_slot[s], part.numel_loads[s],
               part.cost_loads[s]);
  }
  fmt::print(
      "# partition: {} units ({} packed), makespan {} vs lower bound {:.1f} (ratio {:.4f}; "
      "tight bound {:.1f}, ratio {:.4f}), "
      "imbalance {:.4f} over all slots / {:.4f} over non-empty, {} empty slots, {} same-key "
      "collisions\n",
      part.units.size(), part.packed_units, part.makespan, part.lower_bound, part.ratio,
      part.tight_lower_bound, part.tight_ratio, part.imbalance_all, part.imbalance_nonempty,
      part.empty_slots, part.key_collisions);
}

void print_volume(const plan::Plan& p, const Modes& modes, const plan::CommVolume* ddp,
                  const InspectArgs& a) {
  fmt::print(
      "#\n# predicted DMuon communication per step (max over {}; gradient reduces {}; "
      "hooks that fire / communicate)\n",
      p.tp.tp > 1 ? "ranks: the DP collectives on local shards, the TP ones below" : "ranks",
      plan::grad_reduce_name(a.grad_reduce));
  fmt::print("# {:>7} {:>11} {:>10} {:>10} {:>10} {:>12}\n", "reshard", "hooks_fired", "hooks_comm",
             "broadcasts", "reduces", "MB/rank");
  for (const auto& m : modes) {
    if (!m.valid()) {
      fmt::print("  {:>7} not valid: {}\n", m.name(), m.error);
      continue;
    }
    const auto& v = m.volume.owners;
    fmt::print("  {:>7} {:>11} {:>10} {:>10} {:>10} {:>12.3f}\n", m.name(), v.hooks_fired,
               v.hooks_communicating, v.broadcast.max_calls() + v.replicate_broadcast.max_calls(),
               v.reduce.max_calls() + v.reduce_stage2.max_calls(), mb(v.max_bytes_per_rank()));
  }
  if (ddp != nullptr)
    fmt::print(
        "# ddp-dmuon (replicas; the same owners): {} reduces to owners + {} post-step fp32 "
        "broadcasts, {:.3f} MB/rank\n",
        ddp->reduce.max_calls(), ddp->broadcast.max_calls(), mb(ddp->max_bytes_per_rank()));
}

void print_findings(const model::Topology& topo, const plan::Plan& p, const InspectArgs& a) {
  fmt::print("#\n# findings: {} warnings, {} notes\n", p.report.warnings(),
             p.report.findings.size() - static_cast<std::size_t>(p.report.warnings()));
  for (const auto& f : p.report.findings)
    fmt::print("  {} [{}] {}\n", f.severity == boundary::Severity::warning ? "WARNING" : "note",
               boundary::finding_kind_name(f.kind), f.message);
  const auto advice = advise::scale_advice(topo, *a.options, p, a.world_size);
  if (!p.report.suggested_boundary.empty() && !advice.slower)
    fmt::print("# suggested boundary: --boundary '{}'  ({} hook sites, strict)\n",
               p.report.suggested_boundary, p.report.suggested_sites);
  else if (advice.slower)
    fmt::print("# the detector's boundary '{}' ({} hook sites) is not suggested here:\n",
               p.report.suggested_boundary, p.report.suggested_sites);
  fmt::print("{}", advice.line);
  if (p.report.suggested_boundary.empty() && !p.report.no_suggestion.empty())
    fmt::print("# {}\n", p.report.no_suggestion);
}

// The lines under the tables: --route sharded_adamw in the shown mode, --accum, --clip-norm.
void print_notes(const model::Topology& topo, const Mode& shown, const InspectArgs& a) {
  if (!shown.plan->sharded_hooks.dedicated.empty()) {
    const auto sa = sharded_adamw(topo.tree, shown);
    fmt::print(
        "# sharded_adamw ({}): {} params at {} sites, per rank per step: all_gather {} calls "
        "{} B, reduce_scatter (end of backward) {} calls {} B, replicate all_reduce {} calls "
        "{} B\n",
        shown.name(), sa.params, sa.sites, sa.all_gather.calls, sa.all_gather.bytes,
        sa.reduce_scatter.calls, sa.reduce_scatter.bytes, sa.all_reduce.calls, sa.all_reduce.bytes);
  }
  if (a.accum > 1)
    fmt::print(
        "# --accum {}: {} micro-steps per step; row broadcasts and hooks above are x {} "
        "(ddp-dmuon: unchanged, its replicas need no weight collectives), reduces once\n",
        a.accum, a.accum, a.accum);
  if (a.clip > 0)
    fmt::print(
        "# --clip-norm {} ({}-norm): + 1 world all_reduce of one fp32 per rank per step, {} "
        "bytes under the counter convention\n",
        a.clip, engine::clip_norm_type_name(a.clip_type), clip_bytes(shown));
}

nlohmann::json sharded_adamw_json(const model::ModuleTree& tree, const Mode& m) {
  const auto sa = sharded_adamw(tree, m);
  const auto kind = [](const engine::KindExpectation& k) {
    return nlohmann::json{{"calls_per_rank", k.calls}, {"bytes_per_rank", k.bytes}};
  };
  return {{"params", sa.params},
          {"sites", sa.sites},
          {"elements", sa.elements},
          {"all_gather", kind(sa.all_gather)},
          {"reduce_scatter", kind(sa.reduce_scatter)},
          {"replicate_all_reduce", kind(sa.all_reduce)}};
}

// One mode's "comm" entry: its owner-based volume, and the sharded_adamw, TP and clip parts the
// run has; {"error": why} when the mode has no valid plan.
nlohmann::json mode_json(const model::Topology& topo, const Mode& m, const InspectArgs& a) {
  if (!m.valid()) return {{"error", m.error}};
  auto j = plan::volume_to_json(m.volume.owners);
  // --route sharded_adamw (dmuon): its own all-gathers, deferred reduce-scatters, HSDP
  // all-reduces; each parameter's dtype on the wire (dmuon_bench: --comm-dtype).
  if (!m.plan->sharded_hooks.dedicated.empty())
    j["sharded_adamw"] = sharded_adamw_json(topo.tree, m);
  // With TP the DP volumes are per DP rank on local shards; these per world rank.
  if (m.volume.grid.tp > 1) j["tp"] = plan::tp_volume_to_json(m.volume.tp_exchange);
  if (a.clip > 0)
    j["world_all_reduce"] = {{"calls_per_rank", 1}, {"bytes_per_rank", clip_bytes(m)}};
  return j;
}

}  // namespace

InspectArgs inspect_args(const RunOptions& o) {
  InspectArgs a;
  a.options = &o;
  if (!o.boundaries.empty()) {
    const auto item = config::parse_boundary_item(o.boundaries.front());
    a.boundary = item.spec;
    a.strict = item.strict.value_or(!o.lenient);
  } else {
    a.strict = !o.lenient;
  }
  a.strategy = o.owner_strategies.front();
  a.world_size = o.projection.world_sizes.front();
  a.layout = o.layout;
  a.max_rows = static_cast<std::size_t>(o.max_rows);
  a.grad_reduce = o.engine.step.grad_reduce;
  a.shown = o.engine.step.reshard;
  a.accum = o.engine.step.accum;
  a.clip = o.engine.step.clip_norm;
  a.clip_type = o.engine.step.clip_norm_type;
  return a;
}

Modes resolve_modes(const model::Topology& topo, const InspectArgs& a) {
  const auto other_reshard = a.shown == plan::Reshard::z3 ? plan::Reshard::z2 : plan::Reshard::z3;
  Mode shown = resolve_mode(topo, a, a.shown);
  Mode other;
  other.reshard = other_reshard;
  try {
    other = resolve_mode(topo, a, other_reshard);
  } catch (const InputError& e) {
    other.error = e.what();
  }
  if (a.shown == plan::Reshard::z3) return {std::move(shown), std::move(other)};
  return {std::move(other), std::move(shown)};
}

const Mode& shown_mode(const Modes& modes, const InspectArgs& a) {
  return a.shown == plan::Reshard::z3 ? modes[0] : modes[1];
}

nlohmann::json inspect_json(const model::Topology& topo, const Modes& modes,
                            const plan::CommVolume* ddp, const InspectArgs& a) {
  const Mode& shown = shown_mode(modes, a);
  const plan::Plan& p = *shown.plan;
  auto j = plan::plan_to_json(topo.tree, p);
  // The options as given, from the option table (the plan's own fields are what it resolved).
  j["options"] = options::options_json(*a.options, options::kInspect, options::kPlanJson);
  j["topology"] = topo.name;
  j["preset"] = topo.preset;
  j["world_size"] = a.world_size;
  j["replicate"] = a.options->plan.partition.replicate;
  j["grad_reduce"] = plan::grad_reduce_name(a.grad_reduce);
  j["comm"] = {{"z3", mode_json(topo, modes[0], a)}, {"z2", mode_json(topo, modes[1], a)}};
  if (ddp) {
    auto ddp_json = plan::volume_to_json(*ddp);
    for (const char* key : {"reshard", "hooks_fired_per_step", "hooks_communicating_per_step"})
      ddp_json.erase(key);
    if (a.clip > 0)
      ddp_json["world_all_reduce"] = {{"calls_per_rank", 1}, {"bytes_per_rank", clip_bytes(shown)}};
    j["comm"]["ddp_dmuon"] = ddp_json;
  }
  if (!p.sharded_hooks.dedicated.empty()) {
    // Where each sharded_adamw parameter is all-gathered (the shown mode's sites).
    auto sites = nlohmann::json::array();
    for (const auto& site : p.sharded_hooks.sites) {
      auto names = nlohmann::json::array();
      for (int pid : site.params) names.push_back(topo.tree.parameter(pid).name);
      sites.push_back({{"path", site.path}, {"params", names}});
    }
    j["sharded_adamw_sites"] = sites;
  }
  j["accum"] = a.accum;
  if (a.clip > 0)
    j["clip_norm"] = {{"max_norm", a.clip},
                      {"norm_type", engine::clip_norm_type_name(a.clip_type)},
                      {"world_all_reduce_calls_per_rank", 1},
                      {"world_all_reduce_bytes_per_rank", clip_bytes(shown)}};
  j["tp"] = a.options->plan.tp;
  j["ep"] = a.options->plan.ep;
  if (!a.layout.empty()) j["layout"] = a.layout;
  if (!p.report.no_suggestion.empty()) j["no_suggestion"] = p.report.no_suggestion;
  if (!a.options->projection.machine.empty()) {
    // --machine: the suggestion projected against the current boundary at this world.
    const auto advice = advise::scale_advice(topo, *a.options, p, a.world_size);
    j["scale_advice"] = {{"machine", a.options->projection.machine},
                         {"projected", advice.projected},
                         {"suggestion_slower", advice.slower},
                         {"text", advice.line}};
  }
  j["tp_owners"] = plan::tp_owners_to_json(topo.tree, p);
  if (a.options->plan.tp > 1) j["tp_loads"] = plan::tp_loads_to_json(p);
  return j;
}

std::optional<plan::CommVolume> ddp_volume(const model::Topology& topo, const Mode& shown,
                                           const InspectArgs& a) {
  // ddp-dmuon packs per (site, owner) on the shown mode's sites (dmuon_bench plans with
  // --reshard); replicas hold whole parameters, so it has no tensor-parallel form here.
  if (a.options->plan.tp > 1) return std::nullopt;
  return engine::predict_step_volume(topo.tree, *shown.plan,
                                     volume_options(a, engine::Method::ddp_dmuon, a.shown))
      .owners;
}

void print_report(const model::Topology& topo, const Modes& modes, const plan::CommVolume* ddp,
                  const InspectArgs& a) {
  const Mode& shown = shown_mode(modes, a);
  const plan::Plan& p = *shown.plan;
  print_summary(topo, p);
  print_expert_parallel(topo, p);
  print_sites(p, a.rows());
  print_owners(p.partition, a.rows());
  print_volume(p, modes, ddp, a);
  print_findings(topo, p, a);
  if (a.options->plan.tp > 1) print_tp(topo, p, modes, a.rows());
  print_notes(topo, shown, a);
}

}  // namespace dmuon::apps::inspect
