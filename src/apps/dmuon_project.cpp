// dmuon_project: projects dmuon_bench's rows onto a modelled cluster. For each world size the
// same rows as dmuon_bench (boundary sweep x owner strategies, then the baselines) are planned
// for that world, and the engine's step schedule of every rank is replayed on the machine model
// (src/dmuon/project/): the same table, JSON and results file as dmuon_bench, marked as
// projected, with MFU and tokens/s. No MPI launch is needed (one process; --calibrate measures
// the machine at hand under mpirun and writes a machine file instead).

#include <fmt/format.h>

#include <mpi.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <optional>
#include <set>

#include "bench/bench_output.hpp"
#include "bench/bench_record.hpp"
#include "bench/run_list.hpp"
#include "common/config_dir.hpp"
#include "common/run_agreement.hpp"
#include "common/run_main.hpp"
#include "common/setup_agreement.hpp"
#include "dmuon/base/check.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/config/config_file.hpp"
#include "dmuon/engine/engine.hpp"
#include "dmuon/partition/partition.hpp"
#include "dmuon/project/projection.hpp"
#include "dmuon/results/provenance.hpp"
#include "dmuon/results/results_writer.hpp"
#include "project/calibrate.hpp"
#include "project/project_options.hpp"
#include "project/projection_setup.hpp"

namespace {

using namespace dmuon;
using apps::bench::BenchRun;

struct WorldRows {
  int world = 0;
  apps::bench::RunList list;
  std::vector<project::Projection> projections;  // by row (empty for rejected rows)
};

// A row over the machine's device memory (memory_model.hpp): status "oom", never a time.
bool oom(const apps::bench::BenchRun& run) {
  return run.status == "oom";
}

std::string projection_table(const project::Machine& m, const WorldRows& w,
                             const std::string& convention, bool activations) {
  std::string s = fmt::format(
      "# projected on {} (world {} = {} node(s) of {} ranks): throughput ({} FLOP convention) and "
      "how the replay ran\n",
      m.name, w.world, (w.world + m.ranks_per_node - 1) / m.ranks_per_node, m.ranks_per_node,
      convention);
  s += fmt::format(
      "# mem GB: peak device memory per rank, max over ranks, GB = 1e9 bytes (docs/MEMORY.md), "
      "at: its rank and phase{}; "
      "{}\n",
      activations ? "" : ", activations not modelled (no --seq-len)",
      m.memory_gb > 0
          ? fmt::format("over the machine's {:g} GB: oom (+excess), no time", m.memory_gb)
          : std::string("no capacity check (the machine file has no memory_GB)"));
  s += fmt::format(
      "# {:<40} {:<10} {:>14} {:>8} {:>7} {:>8} {:>12} {:>8} {:<16} {:>9} {:>10} {:>9}\n",
      "boundary", "method", "step ms", "MFU %", "HFU %", "TFLOP/s", "tok/s/GPU", "mem GB", "at",
      "programs", "batches", "wall s");
  for (std::size_t i = 0; i < w.list.runs.size(); ++i) {
    const auto& run = w.list.runs[i];
    if (!run.ok() && !oom(run)) continue;
    const auto& p = w.projections[i];
    std::string label = run.boundary_label();
    if (label.size() > 40) label = label.substr(0, 37) + "...";
    const double mem_gb = static_cast<double>(p.memory.peak()) / 1e9;
    const std::string at =
        fmt::format("r{} {}", p.memory.rank, project::memory_phase_name(p.memory.peak_phase()));
    if (oom(run)) {
      const double excess = static_cast<double>(project::excess_bytes(p.memory, m.memory_gb)) / 1e9;
      s += fmt::format(
          "  {:<40} {:<10} {:>14} {:>8} {:>7} {:>8} {:>12} {:>8.1f} {:<16} {:>9} {:>10} {:>9.2f}\n",
          label, engine::method_name(run.method), fmt::format("oom (+{:.1f} GB)", excess), "-", "-",
          "-", "-", mem_gb, at, p.programs, p.batches, p.build_s + p.replay_s);
      continue;
    }
    s += fmt::format(
        "  {:<40} {:<10} {:>14.2f} {:>8.2f} {:>7} {:>8.1f} {:>12.5g} {:>8.1f} {:<16} {:>9} {:>10} "
        "{:>9.2f}\n",
        label, engine::method_name(run.method),
        p.result.phases_ms[static_cast<std::size_t>(engine::Phase::step)], 100 * p.mfu,
        p.hfu > 0 ? fmt::format("{:.2f}", 100 * p.hfu) : std::string("-"), p.model_tflops_per_gpu,
        p.tokens_per_s / w.world, mem_gb, at, p.programs, p.batches, p.build_s + p.replay_s);
  }
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
std::string summary_table(const project::Machine& m, const std::vector<WorldRows>& worlds,
                          const std::string& convention) {
  std::string s = fmt::format(
      "# dmuon_project summary (PROJECTED on machine {}, not measured; {} FLOP convention): per "
      "world and method the fastest row that fits; details per world below\n",
      m.name, convention);
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
                         oom_rows > 0 ? "every row out of memory (oom)" : "no row ran");
        continue;
      }
      const auto& run = w.list.runs[static_cast<std::size_t>(best)];
      const auto& p = w.projections[static_cast<std::size_t>(best)];
      std::string label =
          run.baseline ? std::string("-")
                       : fmt::format("{} ({})", run.boundary.label(),
                                     partition::strategy_name(run.config.partition.strategy));
      if (label.size() > 34) label = label.substr(0, 31) + "...";
      s += fmt::format("  {:>6} {:<10} {:<34} {:>14.2f} {:>7.2f} {:>10.5g} {:>8.1f} {:>8}\n",
                       w.world, engine::method_name(method), label, best_ms, 100 * p.mfu,
                       p.tokens_per_s / w.world, static_cast<double>(p.memory.peak()) / 1e9,
                       adamw > 0 ? fmt::format("{:.3f}", best_ms / adamw) : std::string("-"));
    }
  }
  return s;
}

nlohmann::json memory_json(const project::RankMemory& mem, const project::Machine& m,
                           bool activations) {
  nlohmann::json terms = nlohmann::json::object();
  for (const auto& [name, bytes] : mem.terms()) terms[name] = bytes;
  return {{"terms_bytes", terms},
          {"peak_bytes", mem.peak()},
          {"peak_GB", static_cast<double>(mem.peak()) / 1e9},
          {"rank", mem.rank},
          {"phase", project::memory_phase_name(mem.peak_phase())},
          {"capacity_GB", m.memory_gb},
          {"excess_bytes", project::excess_bytes(mem, m.memory_gb)},
          {"oom", project::excess_bytes(mem, m.memory_gb) > 0},
          {"activations_modelled", activations}};
}

nlohmann::json machine_json(const project::Machine& m) {
  const auto& c = m.compute;
  return {{"name", m.name},
          {"description", m.description},
          {"source", m.source},
          {"device", project::device_kind_name(m.device)},
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

// One invocation: the machine, the model, the rows of every world and their projections.
struct Invocation {
  explicit Invocation(apps::project::ProjectOptions& options)
      : o(options),
        machine(project::load_machine(o.machine, apps::config_dir().empty()
                                                     ? std::string()
                                                     : apps::config_dir() + "/machines")),
        topo(apps::load_topology(o.bench.plan)) {}

  apps::project::ProjectOptions& o;
  project::Machine machine;
  model::Topology topo;
  std::string sweep_source;
  std::string demo_note;  ///< the default sweep's demonstration rows left out
  std::vector<WorldRows> worlds;
  apps::project::ProjectionSetup setup;
  std::optional<Trace> trace;
  /// The bench's options as a projection ran them: one measured step, no device of its own.
  apps::bench::BenchOptions ran;

  bool activations() const { return setup.options.activations.modelled; }
  int failures() const {
    int n = 0;
    for (const auto& w : worlds) n += apps::bench::failures(w.list.runs);
    return n;
  }
  int oom_rows() const {
    int n = 0;
    for (const auto& w : worlds)
      for (const auto& run : w.list.runs) n += oom(run);
    return n;
  }
};

// The rows of every world, validated before the first projection (a bad world fails at once).
void plan_worlds(Invocation& v, const std::vector<engine::Method>& methods,
                 const std::string& config_path) {
  auto& o = v.o;
  auto sweep = apps::bench::invocation_sweep(o.bench, v.topo, apps::config_dir(), config_path,
                                             &v.sweep_source);
  // The default sweep's "incomplete" rows demonstrate the strict/lenient set-up errors of a
  // measured run; a projection answers for boundaries one would run: only when asked.
  if (o.bench.boundaries.empty()) {
    const auto demo = [](const apps::bench::BoundaryChoice& c) { return c.word == "incomplete"; };
    const auto n = std::count_if(sweep.begin(), sweep.end(), demo);
    sweep.erase(std::remove_if(sweep.begin(), sweep.end(), demo), sweep.end());
    if (n > 0)
      v.demo_note = fmt::format(
          "{} demonstration row(s) of the default sweep (incomplete boundaries) not projected: "
          "ask with --boundary incomplete",
          n);
  }
  for (int world : o.worlds) {
    engine::validate(o.bench.engine, world);
    WorldRows w;
    w.world = world;
    w.list = apps::bench::make_run_list(o.bench, v.topo, sweep, methods, world);
    v.worlds.push_back(std::move(w));
  }
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
  for (int r : o.trace_rank_list) {
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

// Projects every row that planned; a row over the device memory gets status oom (no time).
void project_rows(Invocation& v) {
  auto& po = v.setup.options;
  for (auto& w : v.worlds) {
    w.projections.resize(w.list.runs.size());
    for (std::size_t i = 0; i < w.list.runs.size(); ++i) {
      auto& run = w.list.runs[i];
      if (!run.ok()) continue;
      po.engine.step.method = run.method;
      w.projections[i] = project::project(
          v.topo.tree, w.list.plans[static_cast<std::size_t>(run.plan_index)], v.machine, po);
      run.result = w.projections[i].result;
      const auto& mem = w.projections[i].memory;
      if (const std::int64_t excess = project::excess_bytes(mem, v.machine.memory_gb); excess > 0) {
        run.status = "oom";
        run.error = fmt::format(
            "oom: peak {:.1f} GB per rank (rank {}, {}) exceeds the machine's {:g} GB by {:.1f} GB",
            static_cast<double>(mem.peak()) / 1e9, mem.rank,
            project::memory_phase_name(mem.peak_phase()), v.machine.memory_gb,
            static_cast<double>(excess) / 1e9);
      }
    }
  }
  if (v.trace) {
    const auto& run = v.worlds.front().list.runs.front();
    v.trace->write(v.o.bench.trace,
                   fmt::format("{} {}, {} ranks on {}", engine::method_name(run.method),
                               run.boundary_label(), v.worlds.front().world, v.machine.name));
  }
}

// A row's projection figures in its results record (memory, throughput, what made them).
void add_projection_fields(results::RunRecord& rec, const Invocation& v,
                           const apps::bench::BenchRun& run, const project::Projection& p) {
  rec.summary_text["timings_source"] = "projected";
  rec.summary_text["machine"] = v.machine.name;
  rec.summary_text["machine_model"] = v.machine.text;
  rec.summary_text["symmetry"] = project::symmetry_name(v.o.symmetry_resolved);
  if (run.ok() || oom(run)) {
    const auto& mem = p.memory;
    for (const auto& [name, bytes] : mem.terms())
      rec.summary["memory_" + name + "_bytes"] = static_cast<double>(bytes);
    rec.summary["memory_peak_bytes"] = static_cast<double>(mem.peak());
    rec.summary["memory_peak_rank"] = mem.rank;
    rec.summary["memory_capacity_GB"] = v.machine.memory_gb;
    rec.summary["memory_excess_bytes"] =
        static_cast<double>(project::excess_bytes(mem, v.machine.memory_gb));
    rec.summary_text["memory_peak_phase"] = project::memory_phase_name(mem.peak_phase());
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
  f.provenance = results::collect_provenance(argc, argv, largest, v.o.bench.plan.replicate);
  for (const auto& w : v.worlds) {
    auto records = apps::bench::make_records(v.topo, w.list.plans, v.ran, w.list.runs);
    for (std::size_t i = 0; i < records.size(); ++i) {
      add_projection_fields(records[i], v, w.list.runs[i], w.projections[i]);
      f.runs.push_back(std::move(records[i]));
    }
  }
  results::write_results(v.o.bench.output, f);
}

// The bench's JSON row with the projection's own figures.
void add_projection_json(nlohmann::json& x, const Invocation& v, const apps::bench::BenchRun& run,
                         const project::Projection& p, int world) {
  x["world_size"] = world;
  x["projected"] = true;
  if (run.ok() || oom(run)) x["memory"] = memory_json(p.memory, v.machine, v.activations());
  if (!run.ok()) return;
  x["mfu"] = p.mfu;
  x["hfu"] = p.hfu;
  x["model_tflops_per_gpu"] = p.model_tflops_per_gpu;
  x["flop_convention"] = v.o.bench.flops;
  x["tokens_per_s"] = p.tokens_per_s;
  x["model_flops_per_step"] = p.model_flops_per_step;
  x["projection"] = {{"programs", p.programs},         {"batches", p.batches},
                     {"rank_classes", p.rank_classes}, {"rank_class_max", p.rank_class_max},
                     {"build_s", p.build_s},           {"replay_s", p.replay_s}};
}

nlohmann::json invocation_json(const Invocation& v) {
  const auto& o = v.o;
  nlohmann::json j;
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& w : v.worlds) {
    // Nothing ran on this host: no host description (and no sgemm rate) goes with it.
    auto wj = apps::bench::to_json(v.topo, w.list.plans, v.ran, w.world, w.list.runs, {});
    wj.erase("host");
    for (std::size_t i = 0; i < w.list.runs.size(); ++i) {
      auto& x = wj["runs"][i];
      add_projection_json(x, v, w.list.runs[i], w.projections[i], w.world);
      runs.push_back(x);
    }
    if (j.is_null()) j = wj;
  }
  j.erase("world_size");
  j["world_sizes"] = o.worlds;
  j["projected"] = true;
  j["symmetry"] = project::symmetry_name(o.symmetry_resolved);
  j["machine"] = machine_json(v.machine);
  j["runs"] = runs;
  if (const auto& work = v.setup.step_work)
    j["step_work"] = {{"seq_len", o.bench.seq_len},
                      {"micro_batch", o.bench.micro_batch},
                      {"ac", o.bench.ac},
                      {"fusion", o.bench.fusion},
                      {"compute_dtype", engine::dtype_flag_name(work->shape.dtype)}};
  j["notes"] = v.setup.notes;
  j["oom"] = v.oom_rows();  // rows over the device memory: status "oom", not failures
  j["failures"] = v.failures();
  j["passed"] = v.failures() == 0;
  return j;
}

void print_tables(const Invocation& v) {
  const auto& o = v.o;
  if (v.setup.step_work) std::cout << apps::bench::step_work_lines(o.bench, *v.setup.step_work);
  if (!v.setup.flops_note.empty()) std::cout << "# note: " << v.setup.flops_note << "\n";
  for (const auto& n : v.setup.machine_notes) std::cout << "# note: " << n << "\n";
  std::cout << summary_table(v.machine, v.worlds, o.bench.flops);
  if (!v.demo_note.empty()) std::cout << "# note: " << v.demo_note << "\n";
  apps::bench::TableStyle style;
  style.title =
      fmt::format("dmuon_project (PROJECTED on machine {}, not measured):", v.machine.name);
  style.projected = true;
  std::set<std::string> shown;  // legends and warnings once for the whole sweep
  style.shown = &shown;
  for (const auto& w : v.worlds)
    std::cout << "\n"
              << apps::bench::format_table(v.topo, w.list.plans, v.ran, w.world, w.list.runs,
                                           v.sweep_source, {}, style)
              << projection_table(v.machine, w, o.bench.flops, v.activations()) << std::flush;
}

int run_projection(apps::project::ProjectOptions& o, const std::vector<engine::Method>& methods,
                   int argc, char** argv, const std::string& config_path) {
  Invocation v(o);
  plan_worlds(v, methods, config_path);
  if (!o.bench.output.empty()) results::check_output_writable(o.bench.output);
  v.setup = apps::project::make_projection_setup(o.bench, v.topo, v.machine, o.symmetry_resolved);
  if (!o.bench.trace.empty()) prepare_trace(v);
  project_rows(v);
  v.ran = o.bench;
  v.ran.engine.run.steps = 1;
  v.ran.engine.run.warmup = 0;
  v.ran.engine.backend.device =
      v.machine.device == project::DeviceKind::gpu ? engine::Device::cuda : engine::Device::host;
  if (!o.bench.output.empty()) write_results_file(v, argc, argv);
  if (o.bench.json)
    std::cout << invocation_json(v).dump(2) << std::endl;
  else
    print_tables(v);
  return v.failures() == 0 ? apps::kOk : apps::kCheckFailed;
}

int project_main(int argc, char** argv) {
  int rank = 0, size = 1;
  DMUON_CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  DMUON_CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
  // Under mpirun (--calibrate) a rank whose input fails, or that resolved another mode, must
  // take the others out instead of leaving them in the calibration's first collective.
  bool exit_now = false;
  apps::project::ProjectOptions o;
  std::vector<engine::Method> methods;
  std::string config_path;
  apps::run_setup(MPI_COMM_WORLD, [&] {
    config::ExpandedArgs args(argc, argv, apps::project::project_config_keys());
    config_path = args.config_path();
    CLI::App app{
        "dmuon_project: dmuon_bench's rows replayed on a modelled cluster (NCCL cost model, "
        "machine files in configs/machines), or --calibrate the machine at hand under mpirun"};
    app.add_option("--config", "YAML config file (keys = these flags; flags given here win)");
    apps::project::add_project_options(app, o);
    if (!apps::parse_cli(app, args.argc(), args.argv(), rank == 0)) {
      exit_now = true;
      return;
    }
    if (o.bench.plan.list) {
      if (rank == 0) fmt::print("{}", apps::list_topologies_text());
      exit_now = true;
      return;
    }
    methods = apps::project::resolve_project_options(o);
  });
  int go = exit_now ? 0 : 1, all_go = 0;
  DMUON_CHECK_MPI(MPI_Allreduce(&go, &all_go, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  if (!all_go) return apps::kOk;
  // The calibration depends on no option but the mode: the machine file's path and name are
  // rank 0's alone.
  apps::RunDescription run;
  run.add("mode", o.calibrate ? "calibrate" : "projection");
  apps::agree_on_run(MPI_COMM_WORLD, run);
  if (o.calibrate) return apps::project::calibrate(o, MPI_COMM_WORLD);
  if (size != 1)
    throw InputError(fmt::format(
        "a projection runs in one process (started with {} ranks); only --calibrate runs under "
        "mpirun -n N",
        size));
  return run_projection(o, methods, argc, argv, config_path);
}

}  // namespace

int main(int argc, char** argv) {
  return dmuon::apps::run_mpi_main("dmuon_project", argc, argv,
                                   [&] { return project_main(argc, argv); });
}
