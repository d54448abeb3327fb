#include "bench/bench_invocation.hpp"

#include <fmt/format.h>
#include <mpi.h>

#include <cstdio>
#include <iostream>

#include "bench/bench_record.hpp"
#include "bench/progress.hpp"
#include "bench/run_list.hpp"
#include "bench/samples.hpp"
#include "bench/step_work_setup.hpp"
#include "bench/sweep.hpp"
#include "common/config_dir.hpp"
#include "common/plan_setup.hpp"
#include "dmuon/base/atomic_file.hpp"
#include "dmuon/base/check.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/base/trace.hpp"
#include "dmuon/comm/gather_to_root.hpp"
#include "dmuon/engine/engine.hpp"
#include "dmuon/model/pipeline_stage.hpp"
#include "dmuon/partition/partition.hpp"
#include "dmuon/results/provenance.hpp"
#include "dmuon/results/results_writer.hpp"
#include "dmuon/results/summary.hpp"
#include "dmuon/work/flop_convention.hpp"
#include "kernels/blas_info.hpp"
#include "kernels/cuda/kernels.hpp"
#include "options/run_option_outputs.hpp"
#include "options/tool_options.hpp"

namespace dmuon::apps::bench {
namespace {

constexpr const char* kAbout =
    "dmuon_bench: DMuon over a boundary sweep vs FSDP baselines, measured and audited (run under "
    "mpirun); exit 0 OK, 2 bad input, 3 a failed audit or check";
constexpr std::size_t kSgemmSize = 512;

// --pp: this rank's stage of the model (--ep: its EP rank's experts of it), its activation work
// (the stage's blocks) and its place in the pipeline (bench_pipeline.hpp); the engine's options
// carry the place.
void set_up_stage(const model::Topology& whole, kernels::Dtype compute_type, int rank, int size,
                  Invocation& st) {
  auto& o = st.o;
  engine::pipeline_stage_size(size, o.workload.pp);  // one line when P does not divide
  const int stage = engine::pipeline_stage_of(rank, size, o.workload.pp);
  const model::Topology blocks = model::pipeline_stage(whole, o.workload.pp, 1, stage);
  // --ep inside the stage: this EP rank's experts of the stage's blocks.
  st.topo = rank_topology(blocks, o.plan.ep);
  st.step_work =
      attach_step_work(o, blocks, compute_type, {}, o.plan.ep > 1 ? &st.topo->tree : nullptr);
  if (!st.step_work || !st.step_work->has_geometry)
    throw InputError(fmt::format(
        "--pp {}: the model has no geometry, so its stage boundary has no message size (valid: "
        "a topology with one stack of blocks)",
        o.workload.pp));
  st.pipeline = bench_pipeline(o, whole, *st.step_work, rank, size);
  o.engine.step.stages = st.pipeline.stages;
}

}  // namespace

void set_up(int argc, char** argv, int rank, int size, Invocation& st) {
  auto& o = st.o;
  const auto cl = options::parse_tool_options(options::kBench, kAbout, argc, argv, o, rank == 0);
  st.exit_now = cl.exit_now;
  if (st.exit_now) return;
  engine::validate(o.engine, size);
  const model::Topology whole = load_topology(o.model);
  const kernels::Dtype compute_type =
      o.engine.backend.device == engine::Device::cuda ? o.engine.step.wire : kernels::Dtype::f32;
  if (o.workload.pp > 1) {
    set_up_stage(whole, compute_type, rank, size, st);
  } else {
    st.topo = rank_topology(whole, o.plan.ep);
    // --seq-len: the whole model's activation work (--ep: its EP ops, on this rank's experts),
    // computed where the backend computes (the host in fp32, the CUDA backend in the wire
    // type).
    st.step_work =
        attach_step_work(o, whole, compute_type, {}, o.plan.ep > 1 ? &st.topo->tree : nullptr);
  }
  const auto& topo = *st.topo;
  const int world = st.pipeline.stage_world(size);
  if (st.step_work && st.step_work->has_geometry)
    st.model_flops_per_token =
        work::model_flops_per_token(whole, o.workload.seq_len).of(o.workload.flops);
  const auto sweep = invocation_sweep(o, topo, config_dir(), cl.config_path, &st.sweep_source);
  auto list = make_run_list(o, topo, sweep, world);
  st.plans = std::move(list.plans);
  st.runs = std::move(list.runs);
  for (const auto& run : st.runs)
    if (run.ok()) {
      auto eo = o.engine;
      eo.step.method = run.method;
      eo.step.reshard = reshard_for(o, run.method);
      engine::validate_run(topo.tree, st.plans[static_cast<std::size_t>(run.plan_index)], eo,
                           world);
    }
  if (!o.trace.empty() && st.runs.size() != 1)
    throw InputError(fmt::format(
        "--trace records one run; this invocation makes {} (choose one --boundary, --method "
        "and --owner-strategy)",
        st.runs.size()));
  // Rank 0 writes the file; the set-up agreement carries its verdict to every rank.
  if (!o.output.empty() && rank == 0) results::check_output_writable(o.output);
  if (!o.trace.empty() && rank == 0) check_writable(o.trace, "trace file");
}

// What every rank must have resolved alike: the options, the model, the rows and their plans.
RunDescription describe_run(const Invocation& st) {
  RunDescription d;
  options::describe_options(st.o, options::kBench, d);
  // --pp: the stages hold different blocks and plans (each stage's engine run checks its
  // plan); what must agree is the rows every stage runs in the same order.
  if (!st.pipeline.active()) describe_topology(*st.topo, d);
  d.add("rows", st.runs.size());
  for (std::size_t i = 0; i < st.runs.size(); ++i) {
    const auto& run = st.runs[i];
    const std::string row = fmt::format("row {}", i + 1);
    d.add(row, fmt::format("{} {} {} owners {}: {}", engine::method_name(run.method),
                           run.boundary_label(), run.mode(),
                           partition::strategy_name(run.config.partition.strategy), run.status));
    if (run.ok() && !st.pipeline.active())
      d.add(row + " plan hash",
            fmt::format("{:016x}",
                        plan::plan_hash(st.topo->tree,
                                        st.plans[static_cast<std::size_t>(run.plan_index)])));
  }
  return d;
}

// Rank 0 writes the results file after the table is out; every rank learns whether it worked,
// so all exit alike. A failed write names its cause and leaves no temporary behind.
bool write_output(const Invocation& st, int argc, char** argv, int rank, int size,
                  const HostInfo& host) {
  const auto& o = st.o;
  int ok = 1;
  if (rank == 0) {
    try {
      results::ResultsFile f;
      f.provenance = results::collect_provenance(argc, argv, size, o.plan.partition.replicate);
      f.provenance.hostnames = host.hostnames;
      f.provenance.device = engine::device_name(o.engine.backend.device);
      if (o.engine.backend.device == engine::Device::cuda)
        f.provenance.device_model = kernels::cuda::device_name(0);
      f.provenance.sgemm_gflops = host.sgemm_gflops;
      f.provenance.sgemm_size = static_cast<std::int64_t>(kSgemmSize);
      f.runs = make_records(*st.topo, st.plans, o, st.runs);
      results::write_results(o.output, f);
    } catch (const std::exception& e) {
      std::fprintf(stderr,
                   "dmuon_bench: error: cannot write results file '%s': %s (the table above is "
                   "complete; nothing was written)\n",
                   o.output.c_str(), e.what());
      std::fflush(stderr);
      ok = 0;
    }
  }
  DMUON_CHECK_MPI(MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD));
  return ok != 0;
}

// --trace: every rank's spans gathered to rank 0, which writes the file; every rank learns
// whether it worked.
bool write_trace(const Invocation& st, const std::string& spans, int rank, int size) {
  const std::vector<std::string> all = comm::gather_strings(MPI_COMM_WORLD, spans, 0);
  int ok = 1;
  if (rank == 0) {
    try {
      std::vector<int> ranks(static_cast<std::size_t>(size));
      for (int r = 0; r < size; ++r) ranks[static_cast<std::size_t>(r)] = r;
      Trace trace(ranks, size, "measured");
      for (const auto& s : all)
        if (!s.empty()) trace.add_spans_json(s);
      const auto& run = st.runs.front();
      trace.write(st.o.trace, fmt::format("{} {}, {} ranks on {}", engine::method_name(run.method),
                                          run.boundary_label(), size,
                                          engine::device_name(st.o.engine.backend.device)));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "dmuon_bench: error: %s (the table above is complete)\n", e.what());
      std::fflush(stderr);
      ok = 0;
    }
  }
  DMUON_CHECK_MPI(MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD));
  return ok != 0;
}

// The host's BLAS, measured sgemm rate and names, as the table and the record report them;
// rank 0 warns of a generic (slow) BLAS on the host backend.
HostInfo host_info(const Invocation& st, int rank) {
  HostInfo host;
  host.hostnames = comm::gather_strings(MPI_COMM_WORLD, comm::host_name(), 0);
  // Every rank measures sgemm at once (what the run's ranks really get from the cores they
  // share); rank 0 keeps the median over ranks.
  const auto rates =
      comm::gather_doubles(MPI_COMM_WORLD, kernels::host::measure_sgemm_gflops(kSgemmSize, 5), 0);
  host.sgemm_gflops = rank == 0 ? results::median(rates) : 0.0;
  host.blas = kernels::host::blas_info();
  host.sgemm_size = kSgemmSize;
  host.transport_settings = results::transport_settings();
  if (st.o.engine.backend.device == engine::Device::host)
    host.warning = kernels::host::generic_kernel_warning(host.blas);
  if (rank == 0 && !host.warning.empty()) {
    std::fprintf(stderr, "dmuon_bench: warning: %s\n", host.warning.c_str());
    std::fflush(stderr);
  }
  return host;
}

// Runs every row o.repeats times and merges each row's repeats into its result. Repeats are
// interleaved (all rows, then all rows again, ...): a drift of the machine's load during the
// invocation then touches every row alike, and the rows stay comparable. Returns the first
// repeat's timeline of the first row (--trace).
std::string run_rows(Invocation& st, int rank, int size) {
  const auto& o = st.o;
  int measured = 0;
  for (const auto& run : st.runs) measured += run.ok();
  Progress progress(rank, measured * o.repeats,
                    static_cast<long>(measured) * o.repeats * o.engine.run.total_steps());
  std::vector<std::vector<engine::RunResult>> repeats(st.runs.size());
  for (int k = 0; k < o.repeats; ++k)
    for (std::size_t i = 0; i < st.runs.size(); ++i) {
      const auto& run = st.runs[i];
      if (!run.ok()) continue;
      auto eo = o.engine;
      eo.step.method = run.method;
      eo.step.reshard = reshard_for(o, run.method);
      eo.run.on_step = [&progress](int s, int total) { progress.step(s, total); };
      progress.begin_run(fmt::format(
          "{} {}{}", engine::method_name(run.method),
          run.baseline ? "(baseline)" : run.boundary.label(),
          o.repeats > 1 ? fmt::format(" (repeat {}/{})", k + 1, o.repeats) : std::string()));
      repeats[i].push_back(engine::run_engine(
          st.topo->tree, st.plans[static_cast<std::size_t>(run.plan_index)], eo, MPI_COMM_WORLD));
    }
  std::string trace_spans;
  if (!o.trace.empty() && !repeats.empty() && !repeats[0].empty())
    trace_spans = std::move(repeats[0][0].trace_spans);
  const int world = st.pipeline.stage_world(size);
  for (std::size_t i = 0; i < st.runs.size(); ++i)
    if (st.runs[i].ok()) st.runs[i].result = merge_repeats(std::move(repeats[i]), world);
  progress.done();
  if (st.pipeline.active()) {
    st.stage_figures = gather_stage_figures(st.runs, st.pipeline);
    fold_stage_failures(st.runs, st.stage_figures);
  }
  return trace_spans;
}

// Rank 0: the JSON object, or the table with the step work and throughput lines.
void print_results(const Invocation& st, int size, const HostInfo& host) {
  const auto& o = st.o;
  const auto& topo = *st.topo;
  if (o.json) {
    auto j = to_json(topo, st.plans, o, st.pipeline.stage_world(size), st.runs, host);
    if (st.pipeline.active()) j["pipeline"] = pipeline_json(st.pipeline, st.runs, st.stage_figures);
    std::cout << j.dump(2) << std::endl;
    return;
  }
  TableStyle style;
  // --pp: the pipeline's step is the slowest stage's; the table is stage 0's world.
  std::vector<BenchRun> timed = st.runs;
  for (std::size_t i = 0; i < st.stage_figures.size(); ++i)
    if (timed[i].ok())
      timed[i].result.phases_ms[static_cast<std::size_t>(engine::Phase::step)] =
          pipeline_step_ms(st.stage_figures[i]);
  style.before_verdict = throughput_lines(o, size, timed, st.model_flops_per_token,
                                          work::flop_convention_name(o.workload.flops));
  const int world = st.pipeline.stage_world(size);
  std::cout << (st.step_work ? step_work_lines(o, *st.step_work) : "")
            << (st.pipeline.active() ? pipeline_lines(st.pipeline, o, st.runs, st.stage_figures)
                                     : "")
            << format_table(topo, st.plans, o, world, st.runs, st.sweep_source, host, style)
            << std::flush;
}

}  // namespace dmuon::apps::bench
