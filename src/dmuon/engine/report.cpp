#include "dmuon/engine/report.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace dmuon::engine {
namespace {

// Calls per step over every group's channels of the weight kinds (broadcast, all_gather) or of
// the gradient kinds (reduce, reduce_scatter, all_reduce); the TP exchange is neither.
std::int64_t sum_calls(const RunResult& r, bool weight_kinds) {
  std::int64_t c = 0;
  for (std::size_t ch = 0; ch < kChannelCount; ++ch) {
    const auto k = channel_kind(ch);
    if (k == comm::CollectiveKind::gather || k == comm::CollectiveKind::scatter) continue;
    const bool weight =
        k == comm::CollectiveKind::broadcast || k == comm::CollectiveKind::all_gather;
    if (weight == weight_kinds) c += r.kinds[ch].calls_per_step;
  }
  return c;
}

// The channels a run reports: the shard group's SPEC kinds always, the replicate group's with
// HSDP, and any other channel the run used (the clip norm's world all-reduce, the TP
// exchange).
bool reported(const RunResult& r, std::size_t ch) {
  const auto& k = r.kinds[ch];
  if (k.calls_per_step != 0 || k.bytes_formula != 0) return true;
  const auto kind = channel_kind(ch);
  const bool spec_kind =
      kind != comm::CollectiveKind::gather && kind != comm::CollectiveKind::scatter;
  const CommGroup g = channel_group(ch);
  return spec_kind && (g == CommGroup::shard || (g == CommGroup::replicate && r.replicate > 1));
}

// The backend's own peak (docs/MEMORY.md "Measured"); null where it keeps no account (CUDA).
nlohmann::json measured_memory_json(const MeasuredMemory& m) {
  if (!m.measured) return nullptr;
  nlohmann::json terms = nlohmann::json::object();
  for (std::size_t t = 0; t < kMemoryTermCount; ++t)
    terms[memory_term_name(static_cast<MemoryTerm>(t))] = m.terms_at_peak[t];
  return {{"peak_bytes", m.peak_bytes},
          {"peak_MB", static_cast<double>(m.peak_bytes) / 1e6},
          {"rank", m.rank},
          {"phase", m.phase},
          {"terms_bytes", terms},
          {"reserved_bytes", m.reserved_bytes},
          {"uncounted_bytes", m.uncounted_bytes}};
}

}  // namespace

std::int64_t weight_calls_per_step(const RunResult& r) {
  return sum_calls(r, true);
}

std::int64_t reduce_calls_per_step(const RunResult& r) {
  return sum_calls(r, false);
}

bool all_passed(const std::vector<RunResult>& runs) {
  for (const auto& r : runs)
    if (!r.audit_ok || (r.checked && !r.check_passed)) return false;
  return true;
}

namespace {

// What every run of the invocation shares: the model, the plan and the options.
nlohmann::json options_json(const model::Topology& topo, const plan::Plan& plan,
                            const EngineOptions& o) {
  nlohmann::json j;
  j["topology"] = topo.name;
  j["preset"] = topo.preset;
  j["boundary"] = plan.policy.label();
  j["mode"] = plan.config.strict ? "strict" : "lenient";
  j["owner_strategy"] = partition::strategy_name(plan.partition.options.strategy);
  j["reshard"] = plan::reshard_name(o.step.reshard);
  j["grad_reduce"] = plan::grad_reduce_name(o.step.grad_reduce);
  j["prefetch"] = o.step.prefetch;
  j["compute"] = compute_name(o.step.compute);
  j["device"] = device_name(o.backend.device);
  j["comm_dtype"] = dtype_flag_name(o.step.wire);
  j["reduce_dtype"] = dtype_flag_name(o.step.reduce_dtype());
  j["ns"] = std::string(kernels::to_string(o.backend.ns));
  j["ns_dtype"] = o.backend.device == Device::cuda ? dtype_flag_name(o.backend.ns_dtype) : "fp32";
  j["optimizer_pipeline"] = optimizer_pipeline_name(o.step.pipeline);
  j["dmuon_schedule"] = dmuon_schedule_name(o.step.dmuon_schedule);
  j["steps"] = o.run.steps;
  j["warmup"] = o.run.warmup;
  j["seed"] = o.run.seed;
  return j;
}

// The TP exchange's gather and scatter bytes, measured and formula (runs with T > 1).
nlohmann::json tp_json(const RunResult& r) {
  const auto& g = r.kinds[channel_index(CommGroup::tp, comm::CollectiveKind::gather)];
  const auto& s = r.kinds[channel_index(CommGroup::tp, comm::CollectiveKind::scatter)];
  return {{"tp", r.tp},
          {"gather_bytes_per_rank_per_step", g.bytes_measured},
          {"gather_formula_bytes_per_rank_per_step", g.bytes_formula},
          {"scatter_bytes_per_rank_per_step", s.bytes_measured},
          {"scatter_formula_bytes_per_rank_per_step", s.bytes_formula}};
}

// {channel: {calls, bytes, formula bytes, bandwidths}} for the channels the run reports.
nlohmann::json collectives_json(const RunResult& r) {
  // Bandwidths in the nccl-tests sense; null where not measured (CUDA) or idle.
  const auto finite_or_null = [](double v) {
    return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
  };
  nlohmann::json c = nlohmann::json::object();
  for (std::size_t ch = 0; ch < kChannelCount; ++ch) {
    if (!reported(r, ch)) continue;
    const auto& kr = r.kinds[ch];
    c[channel_name(ch)] = {{"calls_per_step", kr.calls_per_step},
                           {"bytes_per_rank_per_step", kr.bytes_measured},
                           {"formula_bytes_per_rank_per_step", kr.bytes_formula},
                           {"message_bytes_per_step", kr.message_bytes},
                           {"group_size", kr.group_size},
                           {"in_flight_ms", finite_or_null(kr.in_flight_ms)},
                           {"algbw_GBps", finite_or_null(kr.algbw_gbps())},
                           {"busbw_GBps", finite_or_null(kr.busbw_gbps(channel_kind(ch)))}};
  }
  return c;
}

// The phases, the step and optimizer times and the memory figures of a run.
void add_times_and_memory(nlohmann::json& x, const RunResult& r) {
  nlohmann::json ph = nlohmann::json::object();
  for (std::size_t p = 0; p < kPhaseCount; ++p)
    ph[phase_name(static_cast<Phase>(p))] = r.phases_ms[p];
  x["phases_ms"] = ph;
  x["step_ms"] = r.phases_ms[static_cast<std::size_t>(Phase::step)];
  x["optimizer_ms"] = r.phases_ms[static_cast<std::size_t>(Phase::optimizer_ns)] +
                      r.phases_ms[static_cast<std::size_t>(Phase::optimizer_other)];
  x["memory_bytes"] = {{"peak_packed_or_gathered", r.peak_packed_bytes},
                       {"master", r.master_bytes},
                       {"optimizer_state", r.momentum_bytes}};
  x["memory_measured"] = measured_memory_json(r.memory_measured);
}

nlohmann::json run_json(const EngineOptions& o, const RunResult& r) {
  nlohmann::json x;
  x["method"] = method_name(r.method);
  x["reshard"] = r.reshard;
  x["world_size"] = r.world_size;
  x["replicate"] = r.replicate;
  x["global_tokens"] = o.step.global_samples(r.world_size / r.tp);
  if (r.tp > 1) x["tp"] = tp_json(r);
  x["hook_sites"] = r.hook_sites;
  x["hook_calls_per_step"] = r.hook_calls_per_step;
  x["hook_calls_formula"] = r.hook_calls_formula;
  x["hooks_communicating_per_step"] = r.hook_comm_calls_per_step;
  x["hooks_communicating_formula"] = r.hook_comm_calls_formula;
  x["collectives"] = collectives_json(r);
  x["bytes_per_rank_per_step"] = r.bytes_measured_total();
  x["formula_bytes_per_rank_per_step"] = r.bytes_formula_total();
  x["audit_ok"] = r.audit_ok;
  if (!r.audit_ok) x["audit_message"] = r.audit_message;
  add_times_and_memory(x, r);
  if (r.checked)
    x["check"] = {{"passed", r.check_passed},
                  {"max_rel_error", r.max_rel_error},
                  {"tolerance", r.check_tolerance},
                  {"worst_parameter", r.worst_param},
                  {"note", r.check_note}};
  return x;
}

}  // namespace

nlohmann::json to_json(const model::Topology& topo, const plan::Plan& plan, const EngineOptions& o,
                       const std::vector<RunResult>& runs) {
  nlohmann::json j = options_json(topo, plan, o);
  j["runs"] = nlohmann::json::array();
  for (const auto& r : runs) j["runs"].push_back(run_json(o, r));
  j["warnings"] = nlohmann::json::array();
  for (const auto& f : plan.report.findings)
    if (f.severity == boundary::Severity::warning) j["warnings"].push_back(f.message);
  j["passed"] = all_passed(runs);
  return j;
}

}  // namespace dmuon::engine
