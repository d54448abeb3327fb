#include "dmuon/engine/report.hpp"

#include <fmt/format.h>

namespace dmuon::engine {
namespace {

double mb(std::int64_t b) {
  return static_cast<double>(b) / 1e6;
}

std::int64_t calls(const RunResult& r, std::initializer_list<comm::CollectiveKind> ks) {
  std::int64_t c = 0;
  for (auto k : ks) c += r.kinds[static_cast<std::size_t>(k)].calls_per_step;
  return c;
}

double phase(const RunResult& r, Phase p) {
  return r.phases_ms[static_cast<std::size_t>(p)];
}
double optimizer_ms(const RunResult& r) {
  return phase(r, Phase::optimizer_ns) + phase(r, Phase::optimizer_other);
}

}  // namespace

bool all_passed(const std::vector<RunResult>& runs) {
  for (const auto& r : runs)
    if (!r.audit_ok || (r.checked && !r.check_passed)) return false;
  return true;
}

std::string format_table(const model::Topology& topo, const plan::Plan& plan,
                         const EngineOptions& o, const std::vector<RunResult>& runs) {
  using comm::CollectiveKind;
  std::string s;
  const int world = runs.empty() ? 1 : runs.front().world_size;
  s += fmt::format("# dmuon_bench  topology {} (preset {})  world {} = R 1 x G {}\n", topo.name,
                   topo.preset.empty() ? "file" : topo.preset, world, world);
  s += fmt::format("# boundary {}  mode {}  owner strategy {}  reshard {}  compute {}\n",
                   plan.policy.label(), plan.config.strict ? "strict" : "lenient",
                   partition::strategy_name(plan.partition.options.strategy),
                   plan::reshard_name(o.reshard), compute_name(o.compute));
  s += fmt::format("# global batch {} samples ({} per rank)  steps {} (+{} warmup)  seed {}\n",
                   o.global_samples(world), o.global_samples(world) / world, o.steps, o.warmup,
                   o.seed);
  s += "# times: median over steps of the max over ranks; MB = 1e6 bytes per rank per step "
       "(bcast/ag = broadcast + all_gather calls, red = reduce + reduce_scatter + all_reduce)\n";
  s += fmt::format(
      "# {:<10} {:<24} {:<8} {:>5} {:>6} {:>8} {:>6} {:>10} {:>10} {:>6} {:>9} {:>9} "
      "{:>9} {:>7} {:>6}\n",
      "method", "boundary", "mode", "sites", "hooks", "bcast/ag", "red", "MB meas", "MB formula",
      "audit", "step ms", "optim ms", "exposed", "vs adamw", "check");
  double adamw_ms = 0;
  for (const auto& r : runs)
    if (r.method == Method::fsdp_adamw) adamw_ms = phase(r, Phase::step);
  for (const auto& r : runs) {
    const double step = phase(r, Phase::step);
    std::string label = plan.policy.label();
    if (label.size() > 24) label = label.substr(0, 21) + "...";
    s += fmt::format(
        "  {:<10} {:<24} {:<8} {:>5} {:>6} {:>8} {:>6} {:>10.3f} {:>10.3f} {:>6} {:>9.2f} {:>9.2f} "
        "{:>9.2f} {:>7} {:>6}\n",
        method_name(r.method), label, plan.config.strict ? "strict" : "lenient", r.hook_sites,
        r.hook_calls_per_step, calls(r, {CollectiveKind::broadcast, CollectiveKind::all_gather}),
        calls(r,
              {CollectiveKind::reduce, CollectiveKind::reduce_scatter, CollectiveKind::all_reduce}),
        mb(r.bytes_measured_total()), mb(r.bytes_formula_total()), r.audit_ok ? "OK" : "FAILED",
        step, optimizer_ms(r), phase(r, Phase::exposed_comm),
        adamw_ms > 0 ? fmt::format("{:.2f}", step / adamw_ms) : std::string("-"),
        !r.checked ? "-" : (r.check_passed ? "OK" : "FAILED"));
  }
  for (const auto& r : runs) {
    if (!r.audit_ok)
      s += fmt::format("# audit FAILED ({}): {}\n", method_name(r.method), r.audit_message);
    if (r.checked)
      s += fmt::format("# check {} ({}): max relative error {:.3e} (tolerance {:.1e}){}\n",
                       r.check_passed ? "OK" : "FAILED", method_name(r.method), r.max_rel_error,
                       o.check_tolerance, r.worst_param.empty() ? "" : ", worst " + r.worst_param);
  }
  for (const auto& f : plan.report.findings)
    if (f.severity == boundary::Severity::warning)
      s += fmt::format("# WARNING [{}] {}\n", boundary::finding_kind_name(f.kind), f.message);
  int failed = 0;
  for (const auto& r : runs) failed += (!r.audit_ok) + (r.checked && !r.check_passed);
  s += fmt::format("# Failed audits and checks : {} {}\n", failed, failed == 0 ? "OK" : "FAILED");
  return s;
}

nlohmann::json to_json(const model::Topology& topo, const plan::Plan& plan, const EngineOptions& o,
                       const std::vector<RunResult>& runs) {
  nlohmann::json j;
  j["topology"] = topo.name;
  j["preset"] = topo.preset;
  j["boundary"] = plan.policy.label();
  j["mode"] = plan.config.strict ? "strict" : "lenient";
  j["owner_strategy"] = partition::strategy_name(plan.partition.options.strategy);
  j["reshard"] = plan::reshard_name(o.reshard);
  j["compute"] = compute_name(o.compute);
  j["steps"] = o.steps;
  j["warmup"] = o.warmup;
  j["seed"] = o.seed;
  j["runs"] = nlohmann::json::array();
  for (const auto& r : runs) {
    nlohmann::json x;
    x["method"] = method_name(r.method);
    x["reshard"] = r.reshard;
    x["world_size"] = r.world_size;
    x["replicate"] = r.replicate;
    x["global_tokens"] = o.global_samples(r.world_size);
    x["hook_sites"] = r.hook_sites;
    x["hook_calls_per_step"] = r.hook_calls_per_step;
    x["hook_calls_formula"] = r.hook_calls_formula;
    nlohmann::json c = nlohmann::json::object();
    for (auto k : comm::kAllCollectiveKinds) {
      const auto& kr = r.kinds[static_cast<std::size_t>(k)];
      c[comm::collective_kind_name(k)] = {{"calls_per_step", kr.calls_per_step},
                                          {"bytes_per_rank_per_step", kr.bytes_measured},
                                          {"formula_bytes_per_rank_per_step", kr.bytes_formula}};
    }
    x["collectives"] = c;
    x["bytes_per_rank_per_step"] = r.bytes_measured_total();
    x["formula_bytes_per_rank_per_step"] = r.bytes_formula_total();
    x["audit_ok"] = r.audit_ok;
    if (!r.audit_ok) x["audit_message"] = r.audit_message;
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
    if (r.checked)
      x["check"] = {{"passed", r.check_passed},
                    {"max_rel_error", r.max_rel_error},
                    {"tolerance", o.check_tolerance},
                    {"worst_parameter", r.worst_param}};
    j["runs"].push_back(x);
  }
  j["warnings"] = nlohmann::json::array();
  for (const auto& f : plan.report.findings)
    if (f.severity == boundary::Severity::warning) j["warnings"].push_back(f.message);
  j["passed"] = all_passed(runs);
  return j;
}

}  // namespace dmuon::engine
