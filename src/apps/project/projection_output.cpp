#include "project/projection_output.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "bench/bench_output.hpp"
#include "bench/step_work_setup.hpp"
#include "dmuon/engine/step/phase.hpp"
#include "dmuon/project/op_cost.hpp"
#include "dmuon/project/op_totals.hpp"

namespace dmuon::apps::project {
namespace {

constexpr std::size_t kWidth = 160;  // every table and comment line fits it
// Each dmuon row's step against fsdp-adamw's as its terms (cost_vs_adamw.hpp), in ms.
std::string cost_lines(const WorldRows& w) {
  std::string s;
  const int adamw = w.adamw_row();
  for (std::size_t i = 0; i < w.cost_vs_adamw.size(); ++i) {
    if (w.cost_vs_adamw[i].empty()) continue;
    const auto step = [&](std::size_t r) {
      return w.projections[r].result.phases_ms[static_cast<std::size_t>(engine::Phase::step)];
    };
    const std::string label = bench::clip(w.list.runs[i].boundary_label(), 40);
    s += fmt::format("# dmuon {} vs fsdp-adamw: {:+.2f} ms =", label,
                     step(i) - step(static_cast<std::size_t>(adamw)));
    for (const auto& [term, ms] : w.cost_vs_adamw[i]) s += fmt::format(" {} {:+.2f}", term, ms);
    s += "\n";
  }
  return s;
}

std::string projection_table(const dm::Machine& m, const WorldRows& w,
                             const std::string& convention, bool activations,
                             std::set<std::string>& shown) {
  std::string s = fmt::format(
      "# projected on {} (world {} = {} node(s) of {} ranks): throughput ({} FLOP convention) and "
      "how the replay ran\n",
      m.name, w.world, (w.world + m.ranks_per_node - 1) / m.ranks_per_node, m.ranks_per_node,
      convention);
  const std::string legend = fmt::format(
      "# mem GB: peak device memory per rank, max over ranks, GB = 1e9 bytes (docs/MEMORY.md), "
      "at: its rank and phase{}; "
      "{}",
      activations ? "" : ", activations not modelled (no --seq-len)",
      m.memory_gb > 0
          ? fmt::format("over the machine's {:g} GB: oom (+excess), no time", m.memory_gb)
          : std::string("no capacity check (the machine file has no memory_GB)"));
  if (shown.insert(legend).second) s += bench::wrap_comment(legend, kWidth);
  s += fmt::format(
      "# {:<36} {:<10} {:>14} {:>8} {:>7} {:>8} {:>10} {:>8} {:<16} {:>8} {:>9} {:>9}\n",
      "boundary", "method", "step ms", "MFU %", "HFU %", "TFLOP/s", "tok/s/GPU", "mem GB", "at",
      "programs", "batches", "wall s");
  for (std::size_t i = 0; i < w.list.runs.size(); ++i) {
    const auto& run = w.list.runs[i];
    if (!run.ok() && !oom(run)) continue;
    const auto& p = w.projections[i];
    const std::string label = bench::clip(run.boundary_label(), 36);
    const double mem_gb = static_cast<double>(p.memory.peak()) / 1e9;
    const std::string at =
        fmt::format("r{} {}", p.memory.rank, dm::memory_phase_name(p.memory.peak_phase()));
    if (oom(run)) {
      const double excess = static_cast<double>(dm::excess_bytes(p.memory, m.memory_gb)) / 1e9;
      s += fmt::format(
          "  {:<36} {:<10} {:>14} {:>8} {:>7} {:>8} {:>10} {:>8.1f} {:<16} {:>8} {:>9} {:>9.2f}\n",
          label, engine::method_name(run.method), fmt::format("oom (+{:.1f} GB)", excess), "-", "-",
          "-", "-", mem_gb, at, p.programs, p.batches, p.build_s + p.replay_s);
      continue;
    }
    s += fmt::format(
        "  {:<36} {:<10} {:>14.2f} {:>8.2f} {:>7} {:>8.1f} {:>10.5g} {:>8.1f} {:<16} {:>8} {:>9} "
        "{:>9.2f}\n",
        label, engine::method_name(run.method),
        p.result.phases_ms[static_cast<std::size_t>(engine::Phase::step)], 100 * p.mfu,
        p.hfu > 0 ? fmt::format("{:.2f}", 100 * p.hfu) : std::string("-"), p.model_tflops_per_gpu,
        p.tokens_per_s / w.world, mem_gb, at, p.programs, p.batches, p.build_s + p.replay_s);
  }
  s += cost_lines(w);
  int oom_rows = 0;
  for (const auto& run : w.list.runs) oom_rows += oom(run);
  if (oom_rows > 0)
    s += fmt::format(
        "# out of memory: {} row(s) marked oom (projected, not run: no time; not a failure of the "
        "tool)\n",
        oom_rows);
  return s;
}

// The answer first: per world and method, the fastest fitting row (dmuon: over the boundary
// sweep and owner strategies), its step, MFU, tokens/s and memory; the details follow.
std::string summary_table(const dm::Machine& m, const std::vector<WorldRows>& worlds,
                          const std::string& convention) {
  std::string s = bench::wrap_comment(
      fmt::format("# dmuon_project summary (PROJECTED on machine {}, not measured; {} FLOP "
                  "convention): per world and method the fastest row that fits; details per "
                  "world below",
                  m.name, convention),
      kWidth);
  s += fmt::format("# {:>6} {:<10} {:<34} {:>14} {:>7} {:>10} {:>8} {:>8}\n", "world", "method",
                   "boundary (owners)", "step ms", "MFU %", "tok/s/GPU", "mem GB", "vs adamw");
  for (const auto& w : worlds) {
    std::vector<engine::Method> methods;
    for (const auto& run : w.list.runs)
      if (std::find(methods.begin(), methods.end(), run.method) == methods.end())
        methods.push_back(run.method);
    double adamw = 0;
    for (std::size_t i = 0; i < w.list.runs.size(); ++i)
      if (w.list.runs[i].ok() && w.list.runs[i].method == engine::Method::fsdp_adamw)
        adamw = w.projections[i].result.phases_ms[static_cast<std::size_t>(engine::Phase::step)];
    for (const auto method : methods) {
      int best = -1, oom_rows = 0;
      double best_ms = 0;
      for (std::size_t i = 0; i < w.list.runs.size(); ++i) {
        const auto& run = w.list.runs[i];
        if (run.method != method) continue;
        oom_rows += oom(run);
        if (!run.ok()) continue;
        const double ms =
            w.projections[i].result.phases_ms[static_cast<std::size_t>(engine::Phase::step)];
        if (best < 0 || ms < best_ms) best = static_cast<int>(i), best_ms = ms;
      }
      if (best < 0) {
        s += fmt::format("  {:>6} {:<10} {}\n", w.world, engine::method_name(method),
                         oom_rows > 0
                             ? "every row out of memory (oom): what would fit is listed below"
                             : "no row ran");
        continue;
      }
      const auto& run = w.list.runs[static_cast<std::size_t>(best)];
      const auto& p = w.projections[static_cast<std::size_t>(best)];
      const std::string label = bench::clip(
          run.baseline ? std::string("-")
                       : fmt::format("{} ({})", run.boundary.label(), run.owner_label()),
          34);
      s += fmt::format("  {:>6} {:<10} {:<34} {:>14.2f} {:>7.2f} {:>10.5g} {:>8.1f} {:>8}\n",
                       w.world, engine::method_name(method), label, best_ms, 100 * p.mfu,
                       p.tokens_per_s / w.world, static_cast<double>(p.memory.peak()) / 1e9,
                       adamw > 0 ? fmt::format("{:.3f}", best_ms / adamw) : std::string("-"));
    }
  }
  return s;
}

nlohmann::json machine_json(const dm::Machine& m) {
  const auto& c = m.compute;
  return {{"name", m.name},
          {"description", m.description},
          {"source", m.source},
          {"device", dm::device_kind_name(m.device)},
          {"ranks_per_node", m.ranks_per_node},
          {"nvlink_domain", m.nvlink_domain},
          {"memory_GB", m.memory_gb},
          {"peak_tflops",
           {{"fp32", c.peak_tflops[0]}, {"bf16", c.peak_tflops[1]}, {"fp16", c.peak_tflops[2]}}},
          {"gemm_efficiency", c.gemm_efficiency},
          {"memory_bandwidth_GBps", c.memory_bandwidth_gbps},
          {"cores", c.cores},
          {"intra_busbw_GBps", m.intra.busbw_gbps},
          {"inter_busbw_GBps", m.inter.busbw_gbps},
          {"model", m.text}};
}

// The bench's JSON row with the projection's own figures.
void add_projection_json(nlohmann::json& x, const Invocation& v, const bench::BenchRun& run,
                         const dm::Projection& p, int world,
                         const std::vector<std::pair<std::string, double>>& cost,
                         const std::vector<std::pair<std::string, std::int64_t>>& memory) {
  if (!cost.empty()) {
    // The terms add up to this row's step less fsdp-adamw's (cost_vs_adamw.hpp).
    nlohmann::json c = nlohmann::json::object(), m = nlohmann::json::object();
    for (const auto& [term, ms] : cost) c[term] = ms;
    for (const auto& [term, bytes] : memory) m[term] = bytes;
    x["cost_vs_adamw"] = c;
    x["memory_vs_adamw_bytes"] = m;
  }
  x["world_size"] = world;
  x["projected"] = true;
  if (run.ok() || oom(run)) x["memory"] = memory_json(p.memory, v.machine, v.activations());
  if (!run.ok()) return;
  x["mfu"] = p.mfu;
  x["hfu"] = p.hfu;
  x["model_tflops_per_gpu"] = p.model_tflops_per_gpu;
  x["flop_convention"] = work::flop_convention_name(v.o.workload.flops);
  x["tokens_per_s"] = p.tokens_per_s;
  x["model_flops_per_step"] = p.model_flops_per_step;
  x["projection"] = {{"programs", p.programs},         {"batches", p.batches},
                     {"rank_classes", p.rank_classes}, {"rank_class_max", p.rank_class_max},
                     {"build_s", p.build_s},           {"replay_s", p.replay_s}};
}

}  // namespace

nlohmann::json memory_json(const dm::RankMemory& mem, const dm::Machine& m, bool activations) {
  nlohmann::json terms = nlohmann::json::object();
  for (const auto& [name, bytes] : mem.terms()) terms[name] = bytes;
  return {{"terms_bytes", terms},
          {"peak_bytes", mem.peak()},
          {"peak_GB", static_cast<double>(mem.peak()) / 1e9},
          {"rank", mem.rank},
          {"phase", dm::memory_phase_name(mem.peak_phase())},
          {"capacity_GB", m.memory_gb},
          {"excess_bytes", dm::excess_bytes(mem, m.memory_gb)},
          {"oom", dm::excess_bytes(mem, m.memory_gb) > 0},
          {"activations_modelled", activations},
          // The reference's step: Newton-Schulz's workspace is persistent (memory_model.hpp).
          {"ns_workspace_in_graph_pool", mem.graph_pool}};
}

nlohmann::json invocation_json(const Invocation& v) {
  const auto& o = v.o;
  nlohmann::json j;
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& w : v.worlds) {
    // Nothing ran on this host: no host description (and no sgemm rate) goes with it.
    auto wj = bench::to_json(v.topo, w.list.plans, v.ran, w.world, w.list.runs, {});
    wj.erase("host");
    for (std::size_t i = 0; i < w.list.runs.size(); ++i) {
      auto& x = wj["runs"][i];
      add_projection_json(x, v, w.list.runs[i], w.projections[i], w.world, w.cost_vs_adamw[i],
                          w.memory_vs_adamw[i]);
      runs.push_back(x);
    }
    if (j.is_null()) j = wj;
  }
  j.erase("world_size");
  j["world_sizes"] = o.projection.world_sizes;
  j["projected"] = true;
  j["symmetry"] = dm::symmetry_name(o.projection.symmetry);
  j["machine"] = machine_json(v.machine);
  j["runs"] = runs;
  if (const auto& work = v.setup.step_work)
    j["step_work"] = {
        {"seq_len", o.workload.seq_len},
        {"micro_batch", o.workload.micro_batch},
        {"ac", work::ac_policy_name(o.workload.ac)},
        {"fusion", work::fusion_name(o.workload.fusion)},
        {"compute_dtype", work->shape.float8 ? "fp8" : engine::dtype_flag_name(work->shape.dtype)}};
  if (const auto& work = v.setup.step_work) {
    // Where the device time goes, each op priced alone (project/op_totals.hpp).
    const ::dmuon::project::OpTime time(v.machine,
                                        ::dmuon::project::compute_type(v.machine, o.engine.step));
    nlohmann::json ops = nlohmann::json::array();
    for (const auto& t : ::dmuon::project::op_totals(*work, time))
      ops.push_back({{"name", t.name},
                     {"parameter_gemm", t.parameter_gemm},
                     {"ms_per_micro_batch", t.seconds * 1e3},
                     {"bytes_per_micro_batch", t.bytes},
                     {"flops_per_micro_batch", t.flops},
                     {"kernels_per_micro_batch", t.kernels}});
    j["step_work"]["ops"] = std::move(ops);
  }
  if (const auto& tp = v.setup.tp_activation)
    j["step_work"]["tp_activation"] = {{"tp", tp->size},
                                       {"sequence_parallel", tp->sequence_parallel},
                                       {"calls_per_step", tp->calls},
                                       {"bytes_per_rank_per_step", tp->bytes_per_rank}};
  if (const auto& cp = v.setup.cp_activation)
    j["step_work"]["cp_activation"] = {{"cp", cp->size},
                                       {"calls_per_step", cp->calls},
                                       {"bytes_per_rank_per_step", cp->bytes_per_rank}};
  if (const auto& ep = v.setup.ep_activation)
    j["step_work"]["ep_activation"] = {{"ep", ep->size},
                                       {"calls_per_step", ep->calls},
                                       {"bytes_per_rank_per_step", ep->bytes_per_rank}};
  j["notes"] = v.setup.notes;
  j["oom"] = v.oom_rows();  // rows over the device memory: status "oom", not failures
  j["failures"] = v.failures();
  j["passed"] = v.failures() == 0;
  return j;
}

std::string projection_tables(const Invocation& v) {
  const auto& o = v.o;
  std::string s;
  const auto note = [&](const std::string& n) { s += bench::wrap_comment("# note: " + n, kWidth); };
  if (!o.workload.seq_len_note.empty()) note(o.workload.seq_len_note);
  if (v.setup.step_work) s += bench::step_work_lines(o, *v.setup.step_work);
  if (!v.setup.flops_note.empty()) note(v.setup.flops_note);
  for (const auto& n : v.setup.group_notes) note(n);
  for (const auto& n : v.setup.machine_notes) note(n);
  s += summary_table(v.machine, v.worlds, work::flop_convention_name(o.workload.flops));
  if (!v.demo_note.empty()) note(v.demo_note);
  bench::TableStyle style;
  style.title =
      fmt::format("dmuon_project (PROJECTED on machine {}, not measured):", v.machine.name);
  style.projected = true;
  std::set<std::string> shown;  // legends and warnings once for the whole sweep
  style.shown = &shown;
  const char* convention = work::flop_convention_name(o.workload.flops);
  for (const auto& w : v.worlds)
    s += "\n" +
         bench::format_table(v.topo, w.list.plans, v.ran, w.world, w.list.runs, v.sweep_source, {},
                             style) +
         projection_table(v.machine, w, convention, v.activations(), shown);
  return s;
}

}  // namespace dmuon::apps::project
