#include "bench/bench_record.hpp"

#include "bench/samples.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "dmuon/comm/collective_counters.hpp"
#include "dmuon/engine/step/grad_clip.hpp"
#include "dmuon/engine/step/step_volume.hpp"
#include "dmuon/partition/cost_model.hpp"
#include "dmuon/results/plan_record.hpp"
#include "dmuon/results/summary_fields.hpp"
#include "options/run_option_outputs.hpp"

namespace dmuon::apps::bench {
namespace {

using engine::Phase;
namespace key = results::summary_key;

// Phases stored in `timings`: the disjoint ones, whose sum is the step (up to loop overhead);
// exposed_comm overlaps them and the step is their total, so both go to the summary only.
constexpr Phase kStoredPhases[] = {Phase::forward_comm,     Phase::forward_compute,
                                   Phase::backward_compute, Phase::backward_comm,
                                   Phase::optimizer_ns,     Phase::optimizer_other};

double phase_ms(const engine::RunResult& r, Phase p) {
  return r.phases_ms[static_cast<std::size_t>(p)];
}

void fill_collectives(results::RunRecord& rec, const engine::RunResult& r) {
  const auto ranks = static_cast<std::size_t>(r.world_size);
  results::Collectives c;
  c.ranks = r.world_size;
  for (std::size_t ch = 0; ch < engine::kChannelCount; ++ch) {
    bool used = false;
    for (std::size_t q = 0; q < ranks; ++q)
      used = used || r.rank_calls[ch * ranks + q] != 0 || r.rank_bytes[ch * ranks + q] != 0 ||
             r.rank_formula_bytes[ch * ranks + q] != 0;
    if (!used) continue;
    c.kinds.push_back(engine::channel_name(ch));
    for (std::size_t q = 0; q < ranks; ++q) {
      c.calls_per_step.push_back(r.rank_calls[ch * ranks + q]);
      c.bytes_per_rank_per_step.push_back(r.rank_bytes[ch * ranks + q]);
      c.formula_bytes_per_rank_per_step.push_back(r.rank_formula_bytes[ch * ranks + q]);
    }
    const auto& k = r.kinds[ch];
    c.message_bytes_per_step.push_back(k.message_bytes);
    c.group_size.push_back(k.group_size);
    c.in_flight_seconds.push_back(1e-3 * k.in_flight_ms);
  }
  rec.collectives = std::move(c);
}

// Every sample (measured step of every repeat) of every rank: the disjoint phases and the
// wall time of the whole step.
void fill_timings(results::RunRecord& rec, const engine::RunResult& r, int repeats) {
  results::Timings t;
  for (auto p : kStoredPhases) t.phases.emplace_back(engine::phase_name(p));
  t.steps = sample_count(r, r.world_size);
  t.ranks = r.world_size;
  t.repeats = repeats;
  const std::size_t np = engine::kPhaseCount;
  for (std::int64_t s = 0; s < t.steps; ++s)
    for (std::int64_t q = 0; q < t.ranks; ++q) {
      const double* x = &r.rank_phases_ms[static_cast<std::size_t>(s * t.ranks + q) * np];
      for (auto p : kStoredPhases) t.seconds.push_back(1e-3 * x[static_cast<std::size_t>(p)]);
      t.step_seconds.push_back(1e-3 * x[static_cast<std::size_t>(Phase::step)]);
    }
  rec.timings = std::move(t);
}

// Newton–Schulz FLOPs of one step over the dedicated matrices, docs/METRICS.md: Σ 5·(4m²n+2m³).
// Parameters routed to adamw (--route) are owner-based without Newton–Schulz: not counted.
double ns_flops(const results::RunRecord& rec, const plan::Plan* plan) {
  double f = 0;
  for (std::size_t i = 0; i < rec.params.name.size(); ++i) {
    if (!rec.params.dedicated[i] || rec.params.shape[i].size() != 2) continue;
    if (plan && !plan->muon(static_cast<int>(i))) continue;  // params are in parameter-id order
    const double a = static_cast<double>(rec.params.shape[i][0]);
    const double b = static_cast<double>(rec.params.shape[i][1]);
    const double m = std::min(a, b), n = std::max(a, b);
    f += 5.0 * (4.0 * m * m * n + 2.0 * m * m * m);
  }
  return f;
}

void fill_measured(results::RunRecord& rec, const model::Topology& topo, const RunOptions& o,
                   const engine::RunResult& r, const plan::Plan* plan) {
  fill_collectives(rec, r);
  fill_timings(rec, r, o.repeats);
  rec.memory["peak_packed_or_gathered_bytes_max"] = r.peak_packed_bytes;
  rec.memory["master_bytes_max"] = r.master_bytes;
  rec.memory["optimizer_state_bytes_max"] = r.momentum_bytes;
  auto& s = rec.summary;
  // The backend's own peak, named as dmuon_project's modelled memory_* fields with "measured".
  if (const auto& m = r.memory_measured; m.measured) {
    for (std::size_t t = 0; t < engine::kMemoryTermCount; ++t)
      s[fmt::format("memory_measured_{}_bytes",
                    engine::memory_term_name(static_cast<engine::MemoryTerm>(t)))] =
          static_cast<double>(m.terms_at_peak[t]);
    s["memory_measured_peak_bytes"] = static_cast<double>(m.peak_bytes);
    s["memory_measured_peak_rank"] = m.rank;
    s["memory_measured_reserved_bytes"] = static_cast<double>(m.reserved_bytes);
    s["memory_measured_uncounted_bytes"] = static_cast<double>(m.uncounted_bytes);
    rec.summary_text["memory_measured_peak_phase"] = m.phase;
  }
  for (std::size_t p = 0; p < engine::kPhaseCount; ++p)
    if (static_cast<Phase>(p) != Phase::step)
      s[std::string(engine::phase_name(static_cast<Phase>(p))) + "_ms"] = r.phases_ms[p];
  const double step_ms = phase_ms(r, Phase::step);
  const double ns_ms = phase_ms(r, Phase::optimizer_ns);
  s[key::step_ms.name] = step_ms;
  s[key::optimizer_ms.name] = ns_ms + phase_ms(r, Phase::optimizer_other);
  s[key::exposed_comm_ms.name] = phase_ms(r, Phase::exposed_comm);
  if (step_ms > 0) {
    s[key::tokens_per_s.name] =
        static_cast<double>(o.engine.step.global_samples(r.world_size / r.tp)) / (step_ms * 1e-3);
    s[key::updated_params_per_s.name] =
        static_cast<double>(topo.tree.total_numel()) / (step_ms * 1e-3);
  }
  // NS runs on the owners only for dmuon, so Σ over owned matrices is the work the optimizer_ns
  // phase (max over ranks) covers; for the baselines every rank repeats it: not reported.
  if ((r.method == engine::Method::dmuon || r.method == engine::Method::ddp_dmuon) && ns_ms > 0)
    s[key::ns_tflops.name] = ns_flops(rec, plan) / (ns_ms * 1e-3) / 1e12;
  s[key::hook_sites.name] = static_cast<double>(r.hook_sites);
  s[key::hook_calls_per_step.name] = static_cast<double>(r.hook_calls_per_step);
  s[key::hook_calls_formula.name] = static_cast<double>(r.hook_calls_formula);
  s[key::hooks_communicating_per_step.name] = static_cast<double>(r.hook_comm_calls_per_step);
  s[key::bytes_per_rank_max.name] = static_cast<double>(r.bytes_measured_total());
  s[key::formula_bytes_per_rank_max.name] = static_cast<double>(r.bytes_formula_total());
  s[key::audit_ok.name] = r.audit_ok ? 1 : 0;
  rec.summary_text[key::timings_source.name] = "measured";
  rec.summary_text[key::audit.name] = r.audit_ok ? "ok" : r.audit_message;
  if (r.checked) {
    s[key::check_passed.name] = r.check_passed ? 1 : 0;
    s[key::max_rel_error.name] = r.max_rel_error;
    rec.summary_text[key::check.name] = r.check_passed ? "passed" : "failed";
  } else {
    rec.summary_text[key::check.name] = "not run";
  }
}

}  // namespace

RunOptions row_options(const RunOptions& o, const BenchRun& run, int world) {
  RunOptions r = o;
  r.methods = {run.method};
  r.owner_strategies = {run.config.partition.strategy};
  r.boundaries.clear();
  if (!run.baseline)
    r.boundaries = {(run.boundary.strict ? "strict:" : "lenient:") + run.boundary.spec};
  if (world > 0) r.projection.world_sizes = {world};
  return r;
}

std::vector<results::RunRecord> make_records(const model::Topology& topo,
                                             const std::vector<plan::Plan>& plans,
                                             const RunOptions& o, const std::vector<BenchRun>& runs,
                                             options::Tool tool) {
  std::vector<results::RunRecord> out;
  for (const auto& run : runs) {
    results::RunRecord rec;
    const std::string method = engine::method_name(run.method);
    if (!run.ok()) {
      rec = results::make_rejected_record(topo, run.config, run.error, method,
                                          reshard_for(o, run.method));
    } else if (run.baseline) {
      // Baselines shard or replicate every parameter: no hook sites, no owners.
      rec = results::make_topology_record(topo);
      rec.method = method;
      rec.reshard = plan::reshard_name(reshard_for(o, run.method));
      rec.world_size = run.result.world_size;
      rec.replicate = run.result.replicate;
      rec.boundary_spec = "";
      rec.strict = true;
      rec.partition.strategy = partition::strategy_name(run.config.partition.strategy);
      rec.partition.cost_model = partition::cost_model_name(run.config.partition.cost_model);
      rec.partition.shard = run.config.partition.shard;
      rec.partition.replicate = run.config.partition.replicate;
    } else {
      const auto& p = plans.at(static_cast<std::size_t>(run.plan_index));
      // The plan record describes the logical model (its TP shards are recorded below).
      auto volume = engine::volume_options(o.engine.step);
      volume.method = run.method;
      volume.tp = false;
      rec = results::make_plan_record(
          topo, p, engine::predict_step_volume(topo.tree, p, volume).owners, method);
    }
    if (run.ok() && run.result.tp > 1) {
      rec.world_size = run.result.world_size;  // R x G x T
      rec.tp = run.result.tp;
      const auto& t = plans.at(static_cast<std::size_t>(run.plan_index)).tp;
      rec.params.tp_shard_dim.assign(t.shard_dim.begin(), t.shard_dim.end());
      rec.params.tp_local_numel = t.local_numel;
    }
    rec.boundary_label = run.baseline
                             ? "none (baseline)"
                             : fmt::format("{} ({})", run.boundary.label(), run.boundary.mode());
    const auto& slots = run.config.partition;
    const RunOptions row = row_options(o, run, slots.shard * slots.replicate * run.config.tp);
    rec.config_text = options::config_yaml(row, tool);
    rec.plan_options = options::key_fragments(row, options::KeyRole::plan);
    rec.run_options = options::key_fragments(row, options::KeyRole::run);
    rec.grad_reduce = plan::grad_reduce_name(o.engine.step.grad_reduce);
    rec.prefetch = o.engine.step.prefetch;
    rec.device = engine::device_name(o.engine.backend.device);
    rec.comm_dtype = engine::dtype_flag_name(o.engine.step.wire);
    rec.reduce_dtype = engine::dtype_flag_name(o.engine.step.reduce_dtype());
    rec.ns = std::string(kernels::to_string(o.engine.backend.ns));
    rec.ns_dtype = o.engine.backend.device == engine::Device::cuda
                       ? engine::dtype_flag_name(o.engine.backend.ns_dtype)
                       : "fp32";
    rec.optimizer_pipeline = engine::optimizer_pipeline_name(o.engine.step.pipeline);
    rec.clip_norm = engine::clip_label(o.engine);
    rec.accum = o.engine.step.accum;
    rec.compute = engine::compute_name(o.engine.step.compute);
    rec.global_samples =
        o.engine.step.global_samples(static_cast<int>(rec.world_size / (rec.replicate * rec.tp)));
    rec.steps = o.engine.run.steps;
    rec.warmup = o.engine.run.warmup;
    rec.seed = static_cast<std::int64_t>(o.engine.run.seed);
    rec.sets = fmt::format("{}", fmt::join(o.model.sets, ","));
    if (run.ok())
      fill_measured(rec, topo, o, run.result,
                    run.baseline ? nullptr : &plans.at(static_cast<std::size_t>(run.plan_index)));
    out.push_back(std::move(rec));
  }
  return out;
}

}  // namespace dmuon::apps::bench
