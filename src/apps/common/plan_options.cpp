#include "common/plan_options.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/run_main.hpp"
#include "dmuon/base/abbreviate.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/boundary/tp_shard.hpp"
#include "dmuon/model/topology_file.hpp"
#include "dmuon/partition/partition.hpp"

namespace dmuon::apps {

CLI::Validator nonempty_value() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        if (value.empty()) return "empty value (give the flag a value)";
        // `--flag= --other` makes CLI11 take "--other" as the value.
        if (value.size() > 1 && value[0] == '-' && value[1] == '-')
          return fmt::format("value '{}' looks like a flag (give the flag a value)",
                             abbreviate_value(value, 40));
        return std::string();
      },
      "");
}

void add_plan_options(CLI::App& app, PlanOptions& o) {
  const auto nonempty = nonempty_value();
  app.add_option("--topology", o.topology, "built-in topology (see --list)")
      ->capture_default_str()
      ->check(nonempty);
  app.add_option("--preset", o.preset, "preset of the topology (default: tiny)")->check(nonempty);
  app.add_option("--set", o.sets, "override a preset dimension, KEY=VALUE (repeatable)")
      ->check(nonempty);
  app.add_option("--topology-file", o.topology_file, "JSON topology file (overrides --topology)")
      ->check(nonempty);
  app.add_flag("--list", o.list, "list built-in topologies, presets and --set keys, then exit");
  app.add_option("--dedicate", o.dedicate,
                 "dedication rule, e.g. 'ndim=2&excludes:router' (default: the topology's)")
      ->check(nonempty);
  app.add_option("--route", o.routes,
                 "parameter route RULE=muon|adamw|fsdp|sharded_adamw (RULE as --dedicate; "
                 "repeatable, the first matching wins), e.g. 'contains:norm=adamw'; ROUTE:fp32 or "
                 "ROUTE:bf16 sets the matched parameters' wire type, weights and gradients, e.g. "
                 "'contains:embed=fsdp:fp32' (default --comm-dtype, --reduce-dtype)")
      ->check(nonempty);
  app.add_option("--boundary", o.boundary,
                 "hook boundary: default | recommended | incomplete | types:T1,T2 | paths:REGEX | "
                 "resolver:PARAM_REGEX=PATH;... (regexes are RE2)")
      ->capture_default_str()
      ->check(nonempty);
  app.add_flag("--lenient", o.lenient,
               "lenient boundary: unmatched parameters fall back to their parent");
  app.add_option("--owner-strategy", o.owner_strategy, "lpt | round_robin | rank0 | lpt_refine")
      ->capture_default_str()
      ->check(nonempty);
  app.add_option("--cost-model", o.cost_model, "optimizer | numel")
      ->capture_default_str()
      ->check(nonempty);
  app.add_flag("--no-pack", o.no_pack, "every parameter its own partition unit");
  app.add_option("--pack-threshold", o.pack_threshold, "numel below which parameters are packed")
      ->capture_default_str()
      ->transform(integer_text<std::int64_t>())
      ->check(nonempty);
  app.add_option("--max-owners-per-group", o.max_owners_per_group,
                 "limit the owners of one layer key (0 = unlimited)")
      ->capture_default_str()
      ->check(nonempty);
  app.add_option("--group-key", o.group_key,
                 "what buckets the partition's units (packing, same-key spreading, "
                 "--max-owners-per-group): layer (layers.N/blocks.N of the name, the reference's) "
                 "| site (the hook site: follows --boundary also where names carry no layer key)")
      ->capture_default_str()
      ->check(nonempty);
  app.add_flag("--no-column-balance", o.no_column_balance, "HSDP: do not balance per-column loads");
  app.add_option("--replicate", o.replicate, "replicate-group size R (HSDP when > 1)")
      ->capture_default_str();
  app.add_option("--tp", o.tp,
                 "tensor-parallel group size T (world = R x G x T, TP fastest: rank = "
                 "(replicate*G + shard)*T + tp)")
      ->capture_default_str();
  app.add_option("--tp-shard", o.tp_shard,
                 fmt::format("rule (as --dedicate) picking the TP-sharded dedicated parameters "
                             "(default '{}')",
                             boundary::kDefaultTpShardRule))
      ->check(nonempty);
  app.add_option("--tp-row", o.tp_row,
                 fmt::format("rule picking the row-parallel (dim 1) ones among them; the rest "
                             "shard dim 0 (default '{}')",
                             boundary::kDefaultTpRowRule))
      ->check(nonempty);
}

std::string list_topologies_text() {
  std::string out;
  for (const auto& t : model::builtin_topologies()) {
    out += fmt::format("{:<11} {}\n", t.name, t.description);
    out += fmt::format("{:<11}   presets: {} (default {})\n", "", fmt::join(t.presets, ", "),
                       t.default_preset);
    out += fmt::format("{:<11}   --set keys: {}{}\n", "", fmt::join(t.keys, ", "),
                       t.layers_alias.empty() ? "" : fmt::format(" (layers = {})", t.layers_alias));
    // The boundaries `--boundary recommended` / `incomplete` stand for (and the dedication
    // rule), as the default preset defines them.
    const auto topo = model::build_topology(t.name, t.default_preset);
    out += fmt::format("{:<11}   dedicate: {}\n", "", topo.dedicate_rule);
    out += fmt::format("{:<11}   recommended boundary: {}\n", "",
                       topo.recommended_boundary.empty() ? "none" : topo.recommended_boundary);
    out += fmt::format("{:<11}   incomplete boundary: {}\n", "",
                       topo.incomplete_boundary.empty()
                           ? "none"
                           : topo.incomplete_boundary +
                                 " (misses some dedicated parameters: strict rejects it, "
                                 "--lenient falls back)");
  }
  return out;
}

model::Topology load_topology(const PlanOptions& o) {
  if (!o.topology_file.empty()) {
    if (!o.sets.empty() || !o.preset.empty())
      throw InputError("--set and --preset apply to built-in topologies, not to --topology-file");
    return model::read_topology_file(o.topology_file);
  }
  std::vector<std::pair<std::string, std::string>> overrides;
  for (const auto& s : o.sets) overrides.push_back(model::parse_override(s));
  const auto& info = model::topology_info(o.topology);
  return model::build_topology(o.topology, o.preset.empty() ? info.default_preset : o.preset,
                               overrides);
}

std::string resolve_boundary_alias(const std::string& boundary, const model::Topology& t) {
  if (boundary == "recommended") {
    if (t.recommended_boundary.empty())
      throw InputError(fmt::format("topology '{}' has no recommended boundary", t.name));
    return t.recommended_boundary;
  }
  if (boundary == "incomplete") {
    if (t.incomplete_boundary.empty())
      throw InputError(fmt::format("topology '{}' has no incomplete boundary", t.name));
    return t.incomplete_boundary;
  }
  return boundary;
}

plan::PlanConfig make_plan_config(const PlanOptions& o, const model::Topology& t, int world_size) {
  if (world_size < 1 || world_size > partition::kMaxSlots)
    throw InputError(
        fmt::format("world size {} is invalid (valid: 1..{})", world_size, partition::kMaxSlots));
  if (o.replicate < 1 || world_size % o.replicate != 0)
    throw InputError(
        fmt::format("replicate size {} does not divide world size {} (valid: a divisor "
                    "of the world size)",
                    o.replicate, world_size));
  if (o.tp < 1 || o.tp > boundary::kMaxTp)
    throw InputError(fmt::format("--tp {} is invalid (valid: 1..{})", o.tp, boundary::kMaxTp));
  if ((world_size / o.replicate) % o.tp != 0)
    throw InputError(fmt::format(
        "--tp {} x --replicate {} does not divide world size {} (valid: R x T dividing the "
        "world size; world = R x G x T)",
        o.tp, o.replicate, world_size));
  plan::PlanConfig c;
  c.dedicate_rule = o.dedicate.empty() ? t.dedicate_rule : o.dedicate;
  if (c.dedicate_rule.empty())
    throw InputError(
        fmt::format("topology '{}' names no dedication rule: pass --dedicate", t.name));
  c.routes = o.routes;
  c.boundary = resolve_boundary_alias(o.boundary, t);
  c.strict = !o.lenient;
  c.reshard = o.reshard;
  c.partition.strategy = partition::parse_strategy(o.owner_strategy);
  c.partition.cost_model = partition::parse_cost_model(o.cost_model);
  c.partition.pack = !o.no_pack;
  c.partition.pack_threshold = o.pack_threshold;
  c.partition.max_owners_per_group = o.max_owners_per_group;
  c.partition.group_key = partition::parse_group_key(o.group_key);
  c.partition.replicate = o.replicate;
  c.partition.shard = world_size / o.replicate / o.tp;
  c.tp = o.tp;
  c.tp_shard_rule = o.tp_shard;
  c.tp_row_rule = o.tp_row;
  c.partition.column_balance = !o.no_column_balance;
  return c;
}

}  // namespace dmuon::apps
