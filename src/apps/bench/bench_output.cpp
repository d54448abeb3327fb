#include "bench/bench_output.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>

#include "dmuon/engine/report.hpp"
#include "dmuon/partition/partition.hpp"

namespace dmuon::apps::bench {
namespace {

using engine::Phase;

double ph(const engine::RunResult& r, Phase p) {
  return r.phases_ms[static_cast<std::size_t>(p)];
}
std::string clip(const std::string& s, std::size_t n) {
  return s.size() <= n ? s : s.substr(0, n - 3) + "...";
}
// The owner strategy of a dmuon row ("-" for baselines, which own nothing).
std::string owners(const BenchRun& run) {
  return run.baseline ? "-" : partition::strategy_name(run.config.partition.strategy);
}
double adamw_step_ms(const std::vector<BenchRun>& runs) {
  for (const auto& r : runs)
    if (r.ok() && r.method == engine::Method::fsdp_adamw) return ph(r.result, Phase::step);
  return 0;
}

}  // namespace

int failures(const std::vector<BenchRun>& runs) {
  int n = 0;
  for (const auto& r : runs)
    if (r.ok()) n += !r.result.audit_ok + (r.result.checked && !r.result.check_passed);
  return n;
}

std::string format_table(const model::Topology& topo, const std::vector<plan::Plan>& plans,
                         const BenchOptions& o, int world, const std::vector<BenchRun>& runs,
                         const std::string& sweep_source) {
  const auto& e = o.engine;
  std::string s;
  const int replicate = o.plan.replicate;
  s += fmt::format("# dmuon_bench  topology {} (preset {})  world {} = R {} x G {}{}\n", topo.name,
                   topo.preset.empty() ? "file" : topo.preset, world, replicate, world / replicate,
                   replicate > 1 ? " (HSDP)" : "");
  s += fmt::format(
      "# boundary sweep: {}  owner strategy {}  reshard {}  grad reduce {}  prefetch {}  "
      "compute {}\n",
      sweep_source, fmt::join(o.owner_strategies_resolved, ","), plan::reshard_name(e.reshard),
      plan::grad_reduce_name(e.grad_reduce), e.prefetch, engine::compute_name(e.compute));
  s += fmt::format("# device {}  comm dtype {}  Newton-Schulz {}{}  optimizer pipeline {}\n",
                   engine::device_name(e.device), engine::dtype_flag_name(e.comm_dtype),
                   kernels::to_string(e.ns),
                   e.device == engine::Device::cuda
                       ? fmt::format(" in {}", engine::dtype_flag_name(e.ns_dtype))
                       : std::string(" in fp32"),
                   engine::optimizer_pipeline_name(e.pipeline));
  s += fmt::format("# global batch {} samples ({} per rank)  steps {} (+{} warmup)  seed {}\n",
                   e.global_samples(world), e.global_samples(world) / world, e.steps, e.warmup,
                   e.seed);
  s += "# times: median over steps of the max over ranks (ms); MB = 1e6 bytes per rank per step;"
       " bcast = broadcast + all_gather calls, red = reduce + reduce_scatter + all_reduce"
       " (HSDP: row and column groups together);"
       " baselines (boundary '-') run once\n";
  const char* hdr =
      "# {:<40} {:<7} {:<10} {:<11} {:<8} {:>5} {:>5} {:>5} {:>5} {:>8} {:>8} {:>5} {:>8} {:>8} "
      "{:>8} {:>6} {:>5}\n";
  s += fmt::format(hdr, "boundary", "mode", "method", "owners", "status", "sites", "hooks", "bcast",
                   "red", "MB meas", "MB form", "audit", "step ms", "optim ms", "exposed", "/adamw",
                   "check");
  const double adamw = adamw_step_ms(runs);
  for (const auto& run : runs) {
    const std::string label = clip(run.boundary_label(), 40);
    if (!run.ok()) {
      s += fmt::format("  {:<40} {:<7} {:<10} {:<11} {:<8} {}\n", label, run.mode(),
                       engine::method_name(run.method), owners(run), run.status,
                       clip(run.error, 110));
      continue;
    }
    const auto& r = run.result;
    const double step = ph(r, Phase::step);
    s += fmt::format(
        "  {:<40} {:<7} {:<10} {:<11} {:<8} {:>5} {:>5} {:>5} {:>5} {:>8.3f} {:>8.3f} {:>5} "
        "{:>8.2f} {:>8.2f} {:>8.2f} {:>6} {:>5}\n",
        label, run.mode(), engine::method_name(run.method), owners(run), run.status, r.hook_sites,
        r.hook_calls_per_step, engine::weight_calls_per_step(r), engine::reduce_calls_per_step(r),
        static_cast<double>(r.bytes_measured_total()) / 1e6,
        static_cast<double>(r.bytes_formula_total()) / 1e6, r.audit_ok ? "OK" : "FAIL", step,
        ph(r, Phase::optimizer_ns) + ph(r, Phase::optimizer_other), ph(r, Phase::exposed_comm),
        adamw > 0 ? fmt::format("{:.2f}", step / adamw) : std::string("-"),
        !r.checked ? "-" : (r.check_passed ? "OK" : "FAIL"));
  }
  // Warnings, one line each, grouped per boundary row (once per boundary when several owner
  // strategies ran it: the findings are the boundary's).
  std::set<std::string> shown;
  for (const auto& run : runs) {
    if (run.baseline) continue;
    const std::string head = fmt::format("{} ({})", run.boundary.label(), run.boundary.mode());
    if (!shown.insert(head).second) continue;
    if (!run.ok()) s += fmt::format("# [{}] rejected at set-up: {}\n", head, run.error);
    for (const auto& w : run.warnings) s += fmt::format("# [{}] {}\n", head, w);
  }
  for (const auto& run : runs) {
    if (!run.ok()) continue;
    const auto& r = run.result;
    const std::string who = fmt::format(
        "{}{}", engine::method_name(run.method),
        run.baseline ? "" : fmt::format(", {} ({})", run.boundary.label(), run.boundary.mode()));
    if (!r.audit_ok) s += fmt::format("# audit FAILED ({}): {}\n", who, r.audit_message);
    if (r.checked)
      s += fmt::format("# check {} ({}): max relative error {:.3e} (tolerance {:.1e}){}\n",
                       r.check_passed ? "OK" : "FAILED", who, r.max_rel_error, r.check_tolerance,
                       r.worst_param.empty() ? "" : ", worst " + r.worst_param);
    if (r.checked && !r.check_note.empty())
      s += fmt::format("# check note ({}): {}\n", who, r.check_note);
  }
  (void)plans;
  const int failed = failures(runs);
  s += fmt::format("# Failed audits and checks : {} {}\n", failed, failed == 0 ? "OK" : "FAILED");
  return s;
}

nlohmann::json to_json(const model::Topology& topo, const std::vector<plan::Plan>& plans,
                       const BenchOptions& o, int world, const std::vector<BenchRun>& runs) {
  const auto& e = o.engine;
  nlohmann::json j;
  j["topology"] = topo.name;
  j["preset"] = topo.preset;
  j["world_size"] = world;
  j["owner_strategy"] = fmt::format("{}", fmt::join(o.owner_strategies_resolved, ","));
  j["replicate"] = o.plan.replicate;
  j["reshard"] = plan::reshard_name(e.reshard);
  j["grad_reduce"] = plan::grad_reduce_name(e.grad_reduce);
  j["prefetch"] = e.prefetch;
  j["compute"] = engine::compute_name(e.compute);
  j["device"] = engine::device_name(e.device);
  j["comm_dtype"] = engine::dtype_flag_name(e.comm_dtype);
  j["ns"] = std::string(kernels::to_string(e.ns));
  j["ns_dtype"] = e.device == engine::Device::cuda ? engine::dtype_flag_name(e.ns_dtype) : "fp32";
  j["optimizer_pipeline"] = engine::optimizer_pipeline_name(e.pipeline);
  j["steps"] = e.steps;
  j["warmup"] = e.warmup;
  j["seed"] = e.seed;
  j["runs"] = nlohmann::json::array();
  const double adamw = adamw_step_ms(runs);
  for (const auto& run : runs) {
    nlohmann::json x = nlohmann::json::object();
    if (run.ok()) {
      const auto& p = plans.at(static_cast<std::size_t>(run.plan_index));
      x = engine::to_json(topo, p, e, {run.result})["runs"][0];
      if (adamw > 0) x["ratio_vs_fsdp_adamw"] = ph(run.result, Phase::step) / adamw;
    }
    x["method"] = engine::method_name(run.method);
    x["baseline"] = run.baseline;
    x["boundary"] = run.baseline ? "" : run.boundary.word;
    x["boundary_spec"] = run.baseline ? "" : run.boundary.spec;
    x["strict"] = run.baseline ? true : run.boundary.strict;
    x["owner_strategy"] = run.baseline ? "" : owners(run);
    x["status"] = run.status;
    if (!run.ok()) x["error"] = run.error;
    x["warnings"] = run.warnings;
    j["runs"].push_back(x);
  }
  j["failures"] = failures(runs);
  j["passed"] = failures(runs) == 0;
  return j;
}

}  // namespace dmuon::apps::bench
