#include "project/projection_run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <map>

#include "advise/scale_advice.hpp"
#include "bench/bench_record.hpp"
#include "common/config_dir.hpp"
#include "common/plan_setup.hpp"
#include "common/run_machine.hpp"
#include "common/run_main.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/engine/engine.hpp"
#include "dmuon/project/cost_vs_adamw.hpp"
#include "dmuon/results/provenance.hpp"
#include "dmuon/results/results_writer.hpp"
#include "options/option.hpp"
#include "project/oom_remedies.hpp"
#include "project/pipeline_run.hpp"
#include "project/projection_output.hpp"

namespace dmuon::apps::project {
namespace {

// The rows of every world, validated before the first projection (a bad world fails at once).
void plan_worlds(Invocation& v, const std::string& config_path) {
  auto& o = v.o;
  auto sweep = bench::invocation_sweep(o, v.topo, config_dir(), config_path, &v.sweep_source);
  // The default sweep's "incomplete" rows demonstrate the strict/lenient set-up errors of a
  // measured run; a projection answers for boundaries one would run: only when asked.
  if (o.boundaries.empty()) {
    const auto demo = [](const bench::BoundaryChoice& c) { return c.word == "incomplete"; };
    const auto n = std::count_if(sweep.begin(), sweep.end(), demo);
    sweep.erase(std::remove_if(sweep.begin(), sweep.end(), demo), sweep.end());
    if (n > 0)
      v.demo_note = fmt::format(
          "{} demonstration row(s) of the default sweep (incomplete boundaries) not projected: "
          "ask with --boundary incomplete",
          n);
  }
  for (int world : o.projection.world_sizes) {
    engine::validate(o.engine, world);
    check_cp_world(o, world);
    WorldRows w;
    w.world = world;
    w.list = bench::make_run_list(o, v.topo, sweep, world);
    v.worlds.push_back(std::move(w));
  }
}

// --tp: a plan whose TP-sharded parameters the step work splits (work::TensorParallel); every
// row's must be the same (they are, unless boundaries differ in what they dedicate).
const plan::Plan* tp_plan(const Invocation& v) {
  const plan::Plan* first = nullptr;
  for (const auto& w : v.worlds)
    for (const auto& p : w.list.plans) {
      if (p.tp.tp == 1) continue;
      if (!first) first = &p;
      if (p.tp.shard_dim != first->tp.shard_dim)
        throw InputError(
            "--tp with --seq-len: the rows TP-shard different parameters (their boundaries "
            "dedicate different ones); project them one --boundary at a time");
    }
  return first;
}

// --trace: the timeline of one run (a sweep's would not fit one view).
void prepare_trace(Invocation& v) {
  const auto& o = v.o;
  std::size_t runs = 0;
  for (const auto& w : v.worlds) runs += w.list.runs.size();
  if (runs != 1)
    throw InputError(fmt::format(
        "--trace records one run; this invocation makes {} (choose one --boundary, --method, "
        "--owner-strategy and --world-size)",
        runs));
  const int world = v.worlds.front().world;
  std::vector<int> ranks;
  const auto& asked = o.projection.trace_ranks;
  for (int r : asked.empty() ? std::vector<int>{0} : asked) {
    if (r >= 0) {
      ranks.push_back(r);
      continue;
    }
    if (world > 256)
      throw InputError(fmt::format(
          "--trace-ranks all: the world has {} ranks (at most 256 traced; name them)", world));
    for (int q = 0; q < world; ++q) ranks.push_back(q);
  }
  if (ranks.size() > 256)
    throw InputError(fmt::format("--trace-ranks names {} ranks (at most 256)", ranks.size()));
  v.trace.emplace(std::move(ranks), world, "projected");
  v.setup.options.trace = &*v.trace;
}

// Every dmuon row's step and memory against the world's fsdp-adamw row, term by term.
void explain_dmuon_rows(Invocation& v, WorldRows& w) {
  const int adamw = w.adamw_row();
  w.cost_vs_adamw.assign(w.list.runs.size(), {});
  w.memory_vs_adamw.assign(w.list.runs.size(), {});
  if (adamw < 0) return;
  const auto& a = w.projections[static_cast<std::size_t>(adamw)];
  auto po = v.setup.options;
  po.engine.step.method = engine::Method::dmuon;
  po.engine.step.reshard = reshard_for(v.o, engine::Method::dmuon);
  for (std::size_t i = 0; i < w.list.runs.size(); ++i) {
    const auto& run = w.list.runs[i];
    if (run.method != engine::Method::dmuon || !run.ok()) continue;
    const auto& plan = w.list.plans[static_cast<std::size_t>(run.plan_index)];
    w.cost_vs_adamw[i] = dm::cost_vs_adamw(v.topo.tree, plan, v.machine, po, w.projections[i], a);
    w.memory_vs_adamw[i] = dm::memory_vs_adamw(w.projections[i].memory, a.memory);
  }
}

// Each dmuon row's suggested boundary that no row of the sweep runs, projected at the world
// against the row's own (advise/scale_advice.hpp): the finding states what it gives at this
// scale. Once per boundary.
void project_suggestions(const Invocation& v, WorldRows& w) {
  std::map<std::string, std::string> by_boundary;
  for (auto& run : w.list.runs) {
    if (run.suggestion.empty() || run.suggestion_swept || run.method != engine::Method::dmuon)
      continue;
    auto it = by_boundary.find(run.boundary.spec);
    if (it == by_boundary.end()) {
      const auto& plan = w.list.plans[static_cast<std::size_t>(run.plan_index)];
      std::string line = advise::scale_advice(v.topo, v.o, plan, w.world).line;
      if (line.rfind("# ", 0) == 0) line.erase(0, 2);
      while (!line.empty() && line.back() == '\n') line.pop_back();
      it = by_boundary.emplace(run.boundary.spec, std::move(line)).first;
    }
    run.suggestion = it->second;
  }
}

// Every row's projection, its explanations against AdamW and its suggestions; the trace.
void project_rows(Invocation& v) {
  project_each_row(v);
  for (auto& w : v.worlds) {
    explain_dmuon_rows(v, w);
    project_suggestions(v, w);
  }
  if (v.trace) {
    const auto& run = v.worlds.front().list.runs.front();
    v.trace->write(v.o.trace,
                   fmt::format("{} {}, {} ranks on {}", engine::method_name(run.method),
                               run.boundary_label(), v.worlds.front().world, v.machine.name));
  }
}

// A row's projection figures in its results record (memory, throughput, what made them).
void add_projection_fields(results::RunRecord& rec, const Invocation& v, const bench::BenchRun& run,
                           const dm::Projection& p) {
  rec.summary_text["timings_source"] = "projected";
  rec.summary_text["machine"] = v.machine.name;
  rec.summary_text["machine_model"] = v.machine.text;
  rec.summary_text["symmetry"] = dm::symmetry_name(v.o.projection.symmetry);
  if (run.ok() || oom(run)) {
    const auto& mem = p.memory;
    for (const auto& [name, bytes] : mem.terms())
      rec.summary["memory_" + name + "_bytes"] = static_cast<double>(bytes);
    rec.summary["memory_peak_bytes"] = static_cast<double>(mem.peak());
    rec.summary["memory_peak_rank"] = mem.rank;
    rec.summary["memory_capacity_GB"] = v.machine.memory_gb;
    rec.summary["memory_excess_bytes"] =
        static_cast<double>(dm::excess_bytes(mem, v.machine.memory_gb));
    rec.summary_text["memory_peak_phase"] = dm::memory_phase_name(mem.peak_phase());
    rec.summary_text["memory_activations"] = v.activations() ? "modelled" : "not modelled";
  }
  if (oom(run)) rec.status = "oom";
  if (run.ok()) {
    rec.summary["mfu"] = p.mfu;
    rec.summary["hfu"] = p.hfu;
    rec.summary["model_tflops_per_gpu"] = p.model_tflops_per_gpu;
    rec.summary["tokens_per_s"] = p.tokens_per_s;
    rec.summary["model_flops_per_step"] = p.model_flops_per_step;
  }
}

void write_results_file(const Invocation& v, int argc, char** argv) {
  results::ResultsFile f;
  int largest = 0;
  for (const auto& w : v.worlds) largest = std::max(largest, w.world);
  f.provenance = results::collect_provenance(argc, argv, largest, v.o.plan.partition.replicate);
  for (const auto& w : v.worlds) {
    auto records = bench::make_records(v.topo, w.list.plans, v.ran, w.list.runs, options::kProject);
    for (std::size_t i = 0; i < records.size(); ++i) {
      add_projection_fields(records[i], v, w.list.runs[i], w.projections[i]);
      f.runs.push_back(std::move(records[i]));
    }
  }
  results::write_results(v.o.output, f);
}

}  // namespace

int WorldRows::adamw_row() const {
  for (std::size_t i = 0; i < list.runs.size(); ++i)
    if (list.runs[i].ok() && list.runs[i].method == engine::Method::fsdp_adamw)
      return static_cast<int>(i);
  return -1;
}

void project_each_row(Invocation& v) {
  auto& po = v.setup.options;
  for (auto& w : v.worlds) {
    w.projections.resize(w.list.runs.size());
    for (std::size_t i = 0; i < w.list.runs.size(); ++i) {
      auto& run = w.list.runs[i];
      if (!run.ok()) continue;
      po.engine.step.method = run.method;
      po.engine.step.reshard = reshard_for(v.o, run.method);
      w.projections[i] = dm::project(
          v.topo.tree, w.list.plans[static_cast<std::size_t>(run.plan_index)], v.machine, po);
      run.result = w.projections[i].result;
      const auto& mem = w.projections[i].memory;
      if (const std::int64_t excess = dm::excess_bytes(mem, v.machine.memory_gb); excess > 0) {
        run.status = "oom";
        run.error = fmt::format(
            "oom: peak {:.1f} GB per rank (rank {}, {}) exceeds the machine's {:g} GB by {:.1f} GB",
            static_cast<double>(mem.peak()) / 1e9, mem.rank,
            dm::memory_phase_name(mem.peak_phase()), v.machine.memory_gb,
            static_cast<double>(excess) / 1e9);
        run.remedies = oom_remedies(v.o, v.topo, v.whole, v.machine, w.world, run);
      }
    }
  }
}

Invocation::Invocation(RunOptions& options) : Invocation(options, load_topology(options.model)) {}

Invocation::Invocation(RunOptions& options, model::Topology model)
    : o(options),
      machine(load_run_machine(o)),
      whole(std::move(model)),
      topo(rank_topology(whole, o.plan.ep)) {}

void prepare(Invocation& v, const std::string& config_path) {
  plan_worlds(v, config_path);
  v.setup = make_projection_setup(v.o, v.whole, v.machine, v.o.projection.symmetry, tp_plan(v),
                                  v.o.plan.ep > 1 ? &v.topo.tree : nullptr);
}

int run_projection(RunOptions& o, int argc, char** argv, const std::string& config_path) {
  if (o.workload.pp > 1) return run_pipeline_projection(o, config_path);
  Invocation v(o);
  prepare(v, config_path);
  if (!o.output.empty()) results::check_output_writable(o.output);
  if (!o.trace.empty()) prepare_trace(v);
  project_rows(v);
  v.ran = o;
  v.ran.engine.run.steps = 1;
  v.ran.engine.run.warmup = 0;
  v.ran.engine.backend.device =
      v.machine.device == dm::DeviceKind::gpu ? engine::Device::cuda : engine::Device::host;
  if (!o.output.empty()) write_results_file(v, argc, argv);
  if (o.json)
    std::cout << invocation_json(v).dump(2) << std::endl;
  else
    std::cout << projection_tables(v) << std::flush;
  return v.failures() == 0 ? kOk : kCheckFailed;
}

}  // namespace dmuon::apps::project
