#include "advise/evaluator.hpp"

#include <fmt/format.h>

#include "bench/run_list.hpp"
#include "common/plan_setup.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/engine/step/phase.hpp"
#include "dmuon/plan/plan.hpp"
#include "dmuon/project/projection.hpp"
#include "project/projection_setup.hpp"

namespace dmuon::apps::advise {
namespace {

// The parts of a step that do not overlap one another: the largest names what to fix.
constexpr engine::Phase kStepParts[] = {
    engine::Phase::forward_compute, engine::Phase::backward_compute, engine::Phase::optimizer_ns,
    engine::Phase::optimizer_other, engine::Phase::exposed_comm,     engine::Phase::step_sync};

// The invocation's options with the candidate's knobs and one method, as the flags would set
// them.
RunOptions options_for(const RunOptions& base, const Candidate& c, engine::Method method) {
  auto o = c.apply(base);
  o.methods = {method};
  return o;
}

// The plan of the candidate's dmuon row (a strict boundary).
plan::PlanConfig plan_config_for(const RunOptions& o, const Candidate& c,
                                 const model::Topology& topo, int world) {
  return make_plan_config(o, topo, world, c.value("boundary"), true, o.owner_strategies.front());
}

}  // namespace

const char* status_name(Status s) {
  switch (s) {
    case Status::ok: return "ok";
    case Status::oom: return "oom";
    case Status::rejected: return "rejected";
  }
  return "?";
}

Evaluator::Evaluator(const RunOptions& base, const model::Topology& topo,
                     const dmuon::project::Machine& machine, int world, double capacity_gb,
                     const model::Topology* whole)
    : base_(base),
      topo_(topo),
      whole_(whole ? *whole : topo),
      machine_(machine),
      world_(world),
      capacity_gb_(capacity_gb) {}

std::string Evaluator::sites_key(const Candidate& c) {
  return c.value("boundary") + ";" + c.value("reshard") + ";" + c.value("ep");
}

const model::Topology& Evaluator::rank_topology(const Candidate& c) {
  const int ep = std::stoi(c.value("ep"));
  // At 1 the whole model itself: its activation work needs no remapping.
  if (ep == base_.plan.ep) return ep == 1 ? whole_ : topo_;
  if (&whole_ == &topo_ && base_.plan.ep > 1)
    throw InputError(fmt::format("--ep {}: only the invocation's --ep {} can be planned here", ep,
                                 base_.plan.ep));
  if (ep == 1) return whole_;
  auto it = rank_topos_.find(ep);
  if (it == rank_topos_.end())
    it = rank_topos_.emplace(ep, ::dmuon::apps::rank_topology(whole_, ep)).first;
  return it->second;
}

bool Evaluator::known(const Candidate& c, engine::Method method) const {
  return cache_.count(c.key() + engine::method_name(method)) > 0;
}

const Outcome& Evaluator::evaluate(const Candidate& c, engine::Method method) {
  const std::string key = c.key() + engine::method_name(method);
  auto it = cache_.find(key);
  if (it == cache_.end()) it = cache_.emplace(key, project_candidate(c, method)).first;
  return it->second;
}

int Evaluator::plan_sites(const Candidate& c) {
  // Sites depend on the boundary, the reshard mode and the EP size only (owners do not move
  // them): one plan per such triple, with the start's other knobs.
  const std::string key = sites_key(c);
  if (auto it = sites_.find(key); it != sites_.end()) return it->second;
  int sites = 0;
  try {
    const auto b = options_for(base_, c, engine::Method::dmuon);
    const auto& topo = rank_topology(c);
    sites = static_cast<int>(
        plan::make_plan(topo.tree, plan_config_for(b, c, topo, world_)).hooks.sites.size());
  } catch (const InputError&) {
    sites = 0;  // cannot be planned: its evaluation is quick
  }
  sites_[key] = sites;
  return sites;
}

Outcome Evaluator::project_candidate(const Candidate& c, engine::Method method) {
  const auto t0 = std::chrono::steady_clock::now();
  Outcome out;
  try {
    auto b = options_for(base_, c, method);
    engine::validate(b.engine, world_);
    project::check_cp_world(b, world_);
    const auto& topo = rank_topology(c);
    // The baselines' FSDP units are their own rule (bench/run_list.hpp), not the boundary.
    const auto plan = engine::traits(method).owners
                          ? plan::make_plan(topo.tree, plan_config_for(b, c, topo, world_))
                          : bench::baseline_plan(b, topo, world_, nullptr);
    out.sites = static_cast<int>(plan.hooks.sites.size());
    sites_[sites_key(c)] = out.sites;
    out.idle_ranks = plan.partition.empty_slots;
    out.suggested_boundary = plan.report.suggested_boundary;
    auto setup = project::make_projection_setup(b, whole_, machine_, base_.projection.symmetry,
                                                &plan, &whole_ == &topo ? nullptr : &topo.tree);
    setup.options.engine.step.method = method;
    ++projections_;
    const auto p = dmuon::project::project(topo.tree, plan, machine_, setup.options);
    const auto& ms = p.result.phases_ms;
    out.step_ms = ms[static_cast<std::size_t>(engine::Phase::step)];
    out.mfu = p.mfu;
    out.tokens_per_s = p.tokens_per_s;
    out.peak_bytes = p.memory.peak();
    out.peak_rank = p.memory.rank;
    out.peak_phase = dmuon::project::memory_phase_name(p.memory.peak_phase());
    out.excess_bytes = dmuon::project::excess_bytes(p.memory, capacity_gb_);
    out.activation_bytes = p.memory.activations + p.memory.recompute;
    for (const auto phase : kStepParts) {
      if (ms[static_cast<std::size_t>(phase)] <= out.dominant_ms) continue;
      out.dominant_ms = ms[static_cast<std::size_t>(phase)];
      out.dominant_phase = engine::phase_name(phase);
    }
    out.status = out.excess_bytes > 0 ? Status::oom : Status::ok;
    if (out.status == Status::oom)
      out.error = fmt::format("peak {:.1f} GB per rank (rank {}, {}) over the cap by {:.1f} GB",
                              static_cast<double>(out.peak_bytes) / 1e9, out.peak_rank,
                              out.peak_phase, static_cast<double>(out.excess_bytes) / 1e9);
  } catch (const InputError& e) {
    // A choice this model or world cannot run (a strict boundary missing parameters, a
    // replicate size the TP group does not divide): not a candidate, and said why.
    out.status = Status::rejected;
    out.error = e.what();
  }
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace dmuon::apps::advise
