// dmuon_inspect: where DMuon would register its hooks and who owns each matrix, for a
// topology, a boundary policy and a rank layout — and what that choice costs. No MPI launch.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <array>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>

#include "common/plan_options.hpp"
#include "common/run_main.hpp"
#include "dmuon/base/abbreviate.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/boundary/tp_shard.hpp"
#include "dmuon/comm/collective_counters.hpp"
#include "dmuon/engine/step/accumulation.hpp"
#include "dmuon/engine/step/grad_clip.hpp"
#include "dmuon/plan/comm_volume.hpp"
#include "dmuon/plan/ddp_dmuon_volume.hpp"
#include "dmuon/plan/plan_json.hpp"
#include "dmuon/plan/sharded_adamw_volume.hpp"
#include "dmuon/plan/tp_json.hpp"
#include "dmuon/plan/tp_layouts.hpp"
#include "dmuon/plan/tp_volume.hpp"

namespace {

using namespace dmuon;

double mb(std::int64_t bytes) {
  return static_cast<double>(bytes) / 1e6;
}

// Tensor parallelism: the TP owners and the per-world-rank volume with the TP gather/scatter.
void print_tp(const model::Topology& topo, const plan::Plan& p, const plan::TpCommVolume& z3,
              const plan::TpCommVolume& z2, std::size_t max_rows) {
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
      z3.world);
  fmt::print("# {:>7} {:>10} {:>10} {:>12} {:>12} {:>12}\n", "reshard", "gathers", "scatters",
             "gather MB", "scatter MB", "MB/rank");
  for (const auto* v : {&z3, &z2})
    fmt::print("  {:>7} {:>10} {:>10} {:>12.3f} {:>12.3f} {:>12.3f}\n",
               plan::reshard_name(v->dp.reshard), v->gather.max_calls(), v->scatter.max_calls(),
               mb(v->gather.max_bytes()), mb(v->scatter.max_bytes()), mb(v->max_bytes_per_rank()));
}

void print_human(const model::Topology& topo, const plan::Plan& p, const plan::CommVolume& z3,
                 const plan::CommVolume& z2, const plan::CommVolume* ddp, std::size_t max_rows) {
  const auto& tree = topo.tree;
  const auto& part = p.partition;
  const auto& hooks = p.hooks;
  std::int64_t ded_numel = 0, ded_bytes = 0;  // site sums are checked: so are theirs
  for (const auto& s : hooks.sites) {
    ded_numel += s.numel;
    ded_bytes += s.bytes;
  }
  fmt::print(
      "# dmuon_inspect  topology {} ({}): {} modules, {} parameters, {} dedicated "
      "({:.3f} M elements, {:.3f} MB)\n",
      topo.name, topo.preset.empty() ? "file" : topo.preset, tree.num_modules(),
      tree.num_parameters(), hooks.dedicated.size(), static_cast<double>(ded_numel) / 1e6,
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
             part.options.pack ? fmt::format("on (< {})", part.options.pack_threshold) : "off");
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
    const auto owners = plan::site_owner_ranks(s, part);
    fmt::print("  {:>4}  {:<40} {:<22} {:>6} {:>10} {:>9.3f} {:>6} {:>8}  {}\n", i,
               s.path.empty() ? "<root>" : s.path, s.type, s.params.size(), s.numel, mb(s.bytes),
               owners.size(), (z3_sites ? 2 : 1) * plan::site_packed_buffers(s, p),
               boundary::site_reason_name(hooks.reason[s.params.front()]));
  }
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
  fmt::print(
      "#\n# predicted DMuon communication per step (max over {}; gradient reduces {}; "
      "hooks that fire / communicate)\n",
      p.tp.tp > 1 ? "ranks: the DP collectives on local shards, the TP ones below" : "ranks",
      plan::grad_reduce_name(z3.grad_reduce));
  fmt::print("# {:>7} {:>11} {:>10} {:>10} {:>10} {:>12}\n", "reshard", "hooks_fired", "hooks_comm",
             "broadcasts", "reduces", "MB/rank");
  for (const auto* v : {&z3, &z2}) {
    fmt::print("  {:>7} {:>11} {:>10} {:>10} {:>10} {:>12.3f}\n", plan::reshard_name(v->reshard),
               v->hooks_fired, v->hooks_communicating,
               v->broadcast.max_calls() + v->replicate_broadcast.max_calls(),
               v->reduce.max_calls() + v->reduce_stage2.max_calls(), mb(v->max_bytes_per_rank()));
  }
  if (ddp != nullptr)
    fmt::print(
        "# ddp-dmuon (replicas; the same owners): {} reduces to owners + {} post-step fp32 "
        "broadcasts, {:.3f} MB/rank\n",
        ddp->reduce.max_calls(), ddp->broadcast.max_calls(), mb(ddp->max_bytes_per_rank()));
  fmt::print("#\n# findings: {} warnings, {} notes\n", p.report.warnings(),
             p.report.findings.size() - static_cast<std::size_t>(p.report.warnings()));
  for (const auto& f : p.report.findings)
    fmt::print("  {} [{}] {}\n", f.severity == boundary::Severity::warning ? "WARNING" : "note",
               boundary::finding_kind_name(f.kind), f.message);
  if (!p.report.suggested_boundary.empty())
    fmt::print("# suggested boundary: --boundary '{}'  ({} hook sites, strict)\n",
               p.report.suggested_boundary, p.report.suggested_sites);
}

int inspect(int argc, char** argv) {
  CLI::App app{"dmuon_inspect: hook sites, owners and their cost for a DMuon plan (no MPI needed)"};
  apps::PlanOptions o;
  int world_size = 8;
  std::string layout;
  bool json = false;
  std::int64_t max_rows = 40;
  std::string grad_reduce = "per-param";
  std::string reshard = "z3";
  apps::add_plan_options(app, o);
  app.add_option("--grad-reduce", grad_reduce,
                 "count gradient reduces per-param (the reference) or packed (per site and owner)")
      ->capture_default_str()
      ->check(apps::nonempty_value());
  app.add_option("--reshard", reshard,
                 "z3 or z2: the mode whose hook sites the tables and the JSON plan show (a tied "
                 "parameter's site differs); the communication is predicted for both, each on "
                 "its own sites")
      ->capture_default_str()
      ->check(apps::nonempty_value());
  app.add_option("--world-size,-n", world_size,
                 fmt::format("number of ranks (R x G), 1..{}", partition::kMaxSlots))
      ->capture_default_str();
  std::string accum_text, clip_text, clip_type_text;
  app.add_option("--accum", accum_text,
                 "predict a step of this many micro-batches (gradient accumulation: row "
                 "broadcasts and hooks x K, reduces once; default 1)");
  app.add_option("--clip-norm", clip_text,
                 "predict with global-norm clipping (> 0): + 1 world all_reduce of one fp32 per "
                 "rank per step");
  app.add_option("--clip-norm-type", clip_type_text, "2 (default) or inf, with --clip-norm");
  auto* world_flag = app.get_option("--world-size");
  std::string layout_names;
  for (const auto& l : plan::tp_layouts())
    layout_names += (layout_names.empty() ? "" : " | ") + l.name;
  app.add_option("--layout", layout,
                 fmt::format("named R x G x T layout setting --world-size, --replicate and --tp: "
                             "{} (docs/METRICS.md)",
                             layout_names))
      ->check(apps::nonempty_value())
      ->excludes(world_flag)
      ->excludes(app.get_option("--replicate"))
      ->excludes(app.get_option("--tp"));
  app.add_flag("--json", json, "print one JSON object instead of tables");
  app.add_option("--max-rows", max_rows, "rows per table in the human output")
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 30));
  if (!apps::parse_cli(app, argc, argv)) return apps::kOk;
  if (o.list) {
    fmt::print("{}", apps::list_topologies_text());
    return apps::kOk;
  }
  if (!layout.empty()) {
    const auto& l = plan::find_tp_layout(layout);
    world_size = l.world;
    o.replicate = l.replicate;
    o.tp = l.tp;
  }
  const auto reduce_mode = plan::parse_grad_reduce(grad_reduce);
  const int accum = app.count("--accum") > 0 ? engine::parse_accum(accum_text) : 1;
  const double clip = app.count("--clip-norm") > 0 ? engine::parse_clip_norm(clip_text) : 0;
  auto clip_type = engine::ClipNormType::two;
  if (app.count("--clip-norm-type") > 0) {
    clip_type = engine::parse_clip_norm_type(clip_type_text);
    if (clip == 0)
      throw InputError(
          fmt::format("--clip-norm-type {} needs --clip-norm (the threshold)", clip_type_text));
  }
  const auto shown = plan::parse_reshard(reshard);
  const auto topo = apps::load_topology(o);
  // One plan per mode: Z2 resolves a tied parameter's site by the boundary rule, Z3 by the
  // lowest common ancestor; the owners are the same (they do not depend on the sites).
  o.reshard = plan::Reshard::z3;
  const auto p3 = plan::make_plan(topo.tree, apps::make_plan_config(o, topo, world_size));
  o.reshard = plan::Reshard::z2;
  const auto p2 = plan::make_plan(topo.tree, apps::make_plan_config(o, topo, world_size));
  const auto& p = shown == plan::Reshard::z3 ? p3 : p2;
  // Per DP rank, on the local shards each rank holds (the full parameters when T = 1).
  const auto z3 = engine::accumulated_volume(
      plan::predict_dmuon_volume(topo.tree, p3.hooks, p3.partition, plan::Reshard::z3, reduce_mode,
                                 0, &p3.tp.local_numel, &p3.route_wire_bytes),
      accum);
  const auto z2 = engine::accumulated_volume(
      plan::predict_dmuon_volume(topo.tree, p2.hooks, p2.partition, plan::Reshard::z2, reduce_mode,
                                 0, &p2.tp.local_numel, &p2.route_wire_bytes),
      accum);
  const bool tp = o.tp > 1;
  const auto tz3 = tp ? plan::predict_tp_volume(topo.tree, p3, plan::Reshard::z3, reduce_mode)
                      : plan::TpCommVolume{};
  const auto tz2 = tp ? plan::predict_tp_volume(topo.tree, p2, plan::Reshard::z2, reduce_mode)
                      : plan::TpCommVolume{};
  // --clip-norm: one all_reduce of one fp32 over the world; its payload under the counter
  // convention is floor(1·(N−1)/N)·4 bytes (0: a one-element all-reduce moves no chunk).
  const auto norm =
      comm::collective_payload(comm::CollectiveKind::all_reduce, world_size, false, 1, 4);
  const auto norm_bytes =
      static_cast<std::int64_t>(comm::collective_volume(comm::CollectiveKind::all_reduce, norm));
  // ddp-dmuon packs per (site, owner) on the shown mode's sites (dmuon_bench plans with
  // --reshard); replicas hold whole parameters, so it has no tensor-parallel form here.
  const std::optional<plan::CommVolume> ddp =
      tp ? std::nullopt
         : std::optional<plan::CommVolume>(plan::predict_ddp_dmuon_volume(
               topo.tree, p.hooks, p.partition, reduce_mode, 0, &p.route_wire_bytes));
  if (json) {
    auto j = plan::plan_to_json(topo.tree, p);
    j["topology"] = topo.name;
    j["preset"] = topo.preset;
    j["world_size"] = world_size;
    j["replicate"] = o.replicate;
    j["grad_reduce"] = plan::grad_reduce_name(reduce_mode);
    j["comm"] = {{"z3", plan::volume_to_json(z3)}, {"z2", plan::volume_to_json(z2)}};
    if (ddp) {
      auto ddp_json = plan::volume_to_json(*ddp);
      ddp_json.erase("reshard");
      ddp_json.erase("hooks_fired_per_step");
      ddp_json.erase("hooks_communicating_per_step");
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
    if (!p3.sharded_hooks.dedicated.empty()) {
      // --route sharded_adamw (dmuon): its own all-gathers, deferred reduce-scatters, HSDP
      // all-reduces; each parameter's dtype on the wire (dmuon_bench: --comm-dtype).
      j["comm"]["z3"]["sharded_adamw"] = plan::sharded_adamw_volume_to_json(
          plan::predict_sharded_adamw_volume(topo.tree, p3, plan::Reshard::z3, 0, accum));
      j["comm"]["z2"]["sharded_adamw"] = plan::sharded_adamw_volume_to_json(
          plan::predict_sharded_adamw_volume(topo.tree, p2, plan::Reshard::z2, 0, accum));
    }
    j["accum"] = accum;
    if (clip > 0) {
      j["clip_norm"] = {{"max_norm", clip},
                        {"norm_type", engine::clip_norm_type_name(clip_type)},
                        {"world_all_reduce_calls_per_rank", 1},
                        {"world_all_reduce_bytes_per_rank", norm_bytes}};
      for (const char* mode : {"z3", "z2", "ddp_dmuon"})
        if (j["comm"].contains(mode))
          j["comm"][mode]["world_all_reduce"] = {{"calls_per_rank", 1},
                                                 {"bytes_per_rank", norm_bytes}};
    }
    j["tp"] = o.tp;
    if (!layout.empty()) j["layout"] = layout;
    j["tp_owners"] = plan::tp_owners_to_json(topo.tree, p);
    if (tp) {
      // DP volumes above are per DP rank on local shards; these are per world rank.
      j["tp_loads"] = plan::tp_loads_to_json(p);
      j["comm"]["z3"]["tp"] = plan::tp_volume_to_json(tz3);
      j["comm"]["z2"]["tp"] = plan::tp_volume_to_json(tz2);
    }
    std::cout << j.dump(1) << "\n";
  } else {
    print_human(topo, p, z3, z2, ddp ? &*ddp : nullptr, static_cast<std::size_t>(max_rows));
    if (tp) print_tp(topo, p, tz3, tz2, static_cast<std::size_t>(max_rows));
    if (!p.sharded_hooks.dedicated.empty()) {
      const auto sa = plan::predict_sharded_adamw_volume(topo.tree, p, shown, 0, accum);
      fmt::print(
          "# sharded_adamw ({}): {} params at {} sites, per rank per step: all_gather {} calls "
          "{} B, reduce_scatter (end of backward) {} calls {} B, replicate all_reduce {} calls "
          "{} B\n",
          plan::reshard_name(shown), sa.params, sa.sites, sa.all_gather.max_calls(),
          sa.all_gather.max_bytes(), sa.reduce_scatter.max_calls(), sa.reduce_scatter.max_bytes(),
          sa.all_reduce.max_calls(), sa.all_reduce.max_bytes());
    }
    if (accum > 1)
      fmt::print(
          "# --accum {}: {} micro-steps per step; row broadcasts and hooks above are x {} "
          "(ddp-dmuon: unchanged, its replicas need no weight collectives), reduces once\n",
          accum, accum, accum);
    if (clip > 0)
      fmt::print(
          "# --clip-norm {} ({}-norm): + 1 world all_reduce of one fp32 per rank per step, {} "
          "bytes under the counter convention\n",
          clip, engine::clip_norm_type_name(clip_type), norm_bytes);
  }
  return apps::kOk;
}

}  // namespace

int main(int argc, char** argv) {
  return dmuon::apps::run_main("dmuon_inspect", [&] { return inspect(argc, argv); });
}
