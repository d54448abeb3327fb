#pragma once
// A plan's settings as the tests spell them (the flags' texts, one boundary, one owner
// strategy), and the topology and plan configuration the tools would build from them. The
// set-up many tests share; it goes through the apps' own RunOptions and make_plan_config.

#include <cstdint>
#include <string>
#include <vector>

#include "common/plan_setup.hpp"
#include "dmuon/partition/cost_model.hpp"
#include "dmuon/partition/partition.hpp"
#include "options/run_options.hpp"

namespace dmuon::test {

struct PlanOptions {
  std::string topology = "moe";
  std::string preset;
  std::vector<std::string> sets;
  std::string topology_file;
  std::string dedicate;
  std::vector<std::string> routes;
  std::string boundary = "default";
  bool lenient = false;
  std::string owner_strategy = "lpt";
  std::string cost_model = "optimizer";
  bool no_pack = false;
  std::int64_t pack_threshold = 5'000'000;
  int max_owners_per_group = 0;
  std::string group_key = "layer";
  bool no_column_balance = false;
  int replicate = 1;
  int tp = 1;
  std::string tp_shard, tp_row;
  int ep = 1;
  plan::Reshard reshard = plan::Reshard::z3;
};

inline apps::RunOptions run_options(const PlanOptions& p) {
  apps::RunOptions o;
  o.model = {p.topology, p.preset, p.sets, p.topology_file};
  o.plan.dedicate_rule = p.dedicate;
  o.plan.routes = p.routes;
  auto& part = o.plan.partition;
  part.cost_model = partition::parse_cost_model(p.cost_model);
  part.pack_threshold = p.no_pack ? 0 : p.pack_threshold;
  part.max_owners_per_group = p.max_owners_per_group;
  part.group_key = partition::parse_group_key(p.group_key);
  part.column_balance = !p.no_column_balance;
  part.replicate = p.replicate;
  o.plan.tp = p.tp;
  o.plan.ep = p.ep;
  o.plan.tp_shard_rule = p.tp_shard;
  o.plan.tp_row_rule = p.tp_row;
  o.engine.step.reshard = p.reshard;
  return o;
}

inline model::Topology load_topology(const PlanOptions& p) {
  return apps::load_rank_topology(run_options(p));
}

inline plan::PlanConfig make_plan_config(const PlanOptions& p, const model::Topology& t,
                                         int world) {
  return apps::make_plan_config(run_options(p), t, world, p.boundary, !p.lenient,
                                partition::parse_strategy(p.owner_strategy));
}

}  // namespace dmuon::test
