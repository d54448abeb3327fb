// dmuon_bench: for one topology, runs DMuon over a boundary sweep (default heuristic and custom
// boundaries, strict and lenient) next to the baselines (fsdp-adamw: the step-time target;
// fsdp-muon: the naive Muon), times every phase, counts every collective and audits the bytes
// against the exact formulas (SPEC §6), prints one table and optionally writes one results
// file (results/README.md). A strict boundary that fails at set-up is a "rejected" row, not an
// error. The table is printed before the file is written, so a failed write loses nothing.

#include <fmt/format.h>
#include <mpi.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <climits>
#include <cstdio>
#include <iostream>
#include <optional>

#include "bench/bench_options.hpp"
#include "bench/bench_output.hpp"
#include "bench/bench_record.hpp"
#include "bench/progress.hpp"
#include "bench/run_list.hpp"
#include "bench/samples.hpp"
#include "bench/sweep.hpp"
#include "common/config_dir.hpp"
#include "common/run_agreement.hpp"
#include "common/run_main.hpp"
#include "common/setup_agreement.hpp"
#include "dmuon/base/atomic_file.hpp"
#include "dmuon/base/check.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/base/trace.hpp"
#include "dmuon/boundary/degradation.hpp"
#include "dmuon/config/config_file.hpp"
#include "dmuon/engine/engine.hpp"
#include "dmuon/partition/partition.hpp"
#include "dmuon/plan/plan.hpp"
#include "dmuon/results/provenance.hpp"
#include "dmuon/results/results_writer.hpp"
#include "dmuon/results/summary.hpp"
#include "dmuon/work/flop_convention.hpp"
#include "kernels/blas_info.hpp"
#include "kernels/cuda/kernels.hpp"
#include "kernels/scoped_kokkos.hpp"

namespace {

using namespace dmuon;
using apps::bench::BenchRun;

std::vector<std::string> gather_hostnames(int rank, int size) {
  constexpr int kLen = 256;
  char mine[kLen] = {};
  gethostname(mine, kLen - 1);
  std::vector<char> all(rank == 0 ? static_cast<std::size_t>(kLen * size) : 0);
  DMUON_CHECK_MPI(MPI_Gather(mine, kLen, MPI_CHAR, all.data(), kLen, MPI_CHAR, 0, MPI_COMM_WORLD));
  std::vector<std::string> out;
  for (int q = 0; rank == 0 && q < size; ++q)
    out.emplace_back(all.data() + static_cast<std::ptrdiff_t>(q) * kLen);
  return out;
}

// Every rank measures sgemm at once (what the run's ranks really get from the cores they
// share); rank 0 receives the median over ranks in GFLOP/s.
constexpr std::size_t kSgemmSize = 512;
double measured_sgemm_gflops(int rank, int size) {
  const double mine = kernels::host::measure_sgemm_gflops(kSgemmSize, 5);
  std::vector<double> all(rank == 0 ? static_cast<std::size_t>(size) : 0);
  DMUON_CHECK_MPI(MPI_Gather(&mine, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  return rank == 0 ? results::median(all) : 0.0;
}

// Everything an invocation decides before its first collective.
struct Setup {
  bool exit_now = false;  ///< --help, --version, --list: done
  apps::bench::BenchOptions o;
  std::vector<engine::Method> methods;
  std::optional<model::Topology> topo;
  std::optional<work::StepWork> step_work;  ///< --seq-len: the model's activation work
  std::string sweep_source = "--boundary";
  std::vector<plan::Plan> plans;
  std::vector<BenchRun> runs;
};

void set_up(int argc, char** argv, int rank, int size, Setup& st) {
  auto& o = st.o;
  // --config FILE becomes flags placed before the command line (configs/README.md).
  config::ExpandedArgs args(argc, argv, config::bench_config_keys());
  CLI::App app{
      "dmuon_bench: DMuon over a boundary sweep vs FSDP baselines, measured and audited (run "
      "under mpirun); exit 0 OK, 2 bad input, 3 a failed audit or check"};
  app.add_option("--config", "YAML config file (keys = these flags; flags given here win)");
  apps::bench::add_bench_options(app, o);
  if (!apps::parse_cli(app, args.argc(), args.argv(), rank == 0)) {
    st.exit_now = true;
    return;
  }
  if (o.plan.list) {
    if (rank == 0) fmt::print("{}", apps::list_topologies_text());
    st.exit_now = true;
    return;
  }

  st.methods = apps::bench::resolve_engine_options(o);
  o.engine.run.trace = !o.trace.empty();
  engine::validate(o.engine, size);
  st.topo = apps::load_topology(o.plan);
  const auto& topo = *st.topo;
  // --seq-len: the model's activation work, computed where the backend computes (the host in
  // fp32, the CUDA backend in the wire type).
  st.step_work = apps::bench::attach_step_work(
      o, topo,
      o.engine.backend.device == engine::Device::cuda ? o.engine.step.wire : kernels::Dtype::f32);
  const auto sweep = apps::bench::invocation_sweep(o, topo, apps::config_dir(), args.config_path(),
                                                   &st.sweep_source);
  auto list = apps::bench::make_run_list(o, topo, sweep, st.methods, size);
  st.plans = std::move(list.plans);
  st.runs = std::move(list.runs);
  const auto& plans = st.plans;
  const auto& runs = st.runs;
  for (const auto& run : runs)
    if (run.ok()) {
      auto eo = o.engine;
      eo.step.method = run.method;
      engine::validate_run(topo.tree, plans[static_cast<std::size_t>(run.plan_index)], eo, size);
    }
  if (!o.trace.empty() && runs.size() != 1)
    throw InputError(fmt::format(
        "--trace records one run; this invocation makes {} (choose one --boundary, --method "
        "and --owner-strategy)",
        runs.size()));
  // Rank 0 writes the file; the set-up agreement carries its verdict to every rank.
  if (!o.output.empty() && rank == 0) results::check_output_writable(o.output);
  if (!o.trace.empty() && rank == 0) check_writable(o.trace, "trace file");
}

// What every rank must have resolved alike: the options, the model, the rows and their plans.
apps::RunDescription describe_run(const Setup& st) {
  apps::RunDescription d;
  apps::bench::describe_options(st.o, st.methods, d);
  apps::describe_topology(*st.topo, d);
  d.add("rows", st.runs.size());
  for (std::size_t i = 0; i < st.runs.size(); ++i) {
    const auto& run = st.runs[i];
    const std::string row = fmt::format("row {}", i + 1);
    d.add(row, fmt::format("{} {} {} owners {}: {}", engine::method_name(run.method),
                           run.boundary_label(), run.mode(),
                           partition::strategy_name(run.config.partition.strategy), run.status));
    if (run.ok())
      d.add(row + " plan hash",
            fmt::format("{:016x}",
                        plan::plan_hash(st.topo->tree,
                                        st.plans[static_cast<std::size_t>(run.plan_index)])));
  }
  return d;
}

// Rank 0 writes the results file after the table is out; every rank learns whether it worked,
// so all exit alike. A failed write names its cause and leaves no temporary behind.
bool write_output(const Setup& st, int argc, char** argv, int rank, int size,
                  const apps::bench::HostInfo& host) {
  const auto& o = st.o;
  int ok = 1;
  if (rank == 0) {
    try {
      results::ResultsFile f;
      f.provenance = results::collect_provenance(argc, argv, size, o.plan.replicate);
      f.provenance.hostnames = host.hostnames;
      f.provenance.device = engine::device_name(o.engine.backend.device);
      if (o.engine.backend.device == engine::Device::cuda)
        f.provenance.device_model = kernels::cuda::device_name(0);
      f.provenance.sgemm_gflops = host.sgemm_gflops;
      f.provenance.sgemm_size = static_cast<std::int64_t>(kSgemmSize);
      f.runs = apps::bench::make_records(*st.topo, st.plans, o, st.runs);
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

// Every rank's string on `root` (empty elsewhere).
std::vector<std::string> gather_strings(const std::string& mine, int root, int rank, int size) {
  const auto n = static_cast<long long>(mine.size());
  if (n > INT_MAX) throw RuntimeFailure("--trace: a rank's timeline exceeds 2 GB");
  int len = static_cast<int>(n);
  std::vector<int> lens(static_cast<std::size_t>(size)), offsets(static_cast<std::size_t>(size));
  DMUON_CHECK_MPI(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, root, MPI_COMM_WORLD));
  long long total = 0;
  for (int r = 0; r < size; ++r) {
    if (total > INT_MAX) throw RuntimeFailure("--trace: the timelines exceed 2 GB");
    offsets[static_cast<std::size_t>(r)] = static_cast<int>(total);
    total += lens[static_cast<std::size_t>(r)];
  }
  std::string buf(rank == root ? static_cast<std::size_t>(total) : 0, '\0');
  DMUON_CHECK_MPI(MPI_Gatherv(mine.data(), len, MPI_CHAR, buf.data(), lens.data(), offsets.data(),
                              MPI_CHAR, root, MPI_COMM_WORLD));
  std::vector<std::string> out;
  if (rank == root)
    for (int r = 0; r < size; ++r)
      out.push_back(buf.substr(static_cast<std::size_t>(offsets[static_cast<std::size_t>(r)]),
                               static_cast<std::size_t>(lens[static_cast<std::size_t>(r)])));
  return out;
}

// --trace: every rank's spans gathered to rank 0, which writes the file; every rank learns
// whether it worked.
bool write_trace(const Setup& st, const std::string& spans, int rank, int size) {
  const std::vector<std::string> all = gather_strings(spans, 0, rank, size);
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

// Model FLOPs per token under --flops for a --seq-len run of a model with a geometry, else 0.
double model_flops_per_token(const Setup& st) {
  if (!st.step_work || !st.step_work->has_geometry) return 0;
  return work::model_flops_per_token(*st.topo, st.o.seq_len).of(st.o.flops_resolved);
}

// The host's BLAS, measured sgemm rate and names, as the table and the record report them;
// rank 0 warns of a generic (slow) BLAS on the host backend.
apps::bench::HostInfo host_info(const Setup& st, int rank, int size) {
  apps::bench::HostInfo host;
  host.hostnames = gather_hostnames(rank, size);
  host.sgemm_gflops = measured_sgemm_gflops(rank, size);
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
std::string run_rows(Setup& st, int rank, int size) {
  const auto& o = st.o;
  int measured = 0;
  for (const auto& run : st.runs) measured += run.ok();
  apps::bench::Progress progress(
      rank, measured * o.repeats,
      static_cast<long>(measured) * o.repeats * o.engine.run.total_steps());
  std::vector<std::vector<engine::RunResult>> repeats(st.runs.size());
  for (int k = 0; k < o.repeats; ++k)
    for (std::size_t i = 0; i < st.runs.size(); ++i) {
      const auto& run = st.runs[i];
      if (!run.ok()) continue;
      auto eo = o.engine;
      eo.step.method = run.method;
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
  for (std::size_t i = 0; i < st.runs.size(); ++i)
    if (st.runs[i].ok())
      st.runs[i].result = apps::bench::merge_repeats(std::move(repeats[i]), size);
  progress.done();
  return trace_spans;
}

// Rank 0: the JSON object, or the table with the step work and throughput lines.
void print_results(const Setup& st, int size, const apps::bench::HostInfo& host) {
  const auto& o = st.o;
  const auto& topo = *st.topo;
  if (o.json) {
    std::cout << apps::bench::to_json(topo, st.plans, o, size, st.runs, host).dump(2) << std::endl;
    return;
  }
  apps::bench::TableStyle style;
  style.before_verdict = apps::bench::throughput_lines(
      o, size, st.runs, model_flops_per_token(st), work::flop_convention_name(o.flops_resolved));
  std::cout << (st.step_work ? apps::bench::step_work_lines(o, *st.step_work) : "")
            << apps::bench::format_table(topo, st.plans, o, size, st.runs, st.sweep_source, host,
                                         style)
            << std::flush;
}

int bench(int argc, char** argv) {
  int rank = 0, size = 1;
  DMUON_CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  DMUON_CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));

  // Validate everything before the first collective; then agree: a rank whose input fails
  // (a file missing on its node) takes every rank out with its message instead of leaving
  // the others waiting in a collective.
  Setup st;
  apps::run_setup(MPI_COMM_WORLD, [&] { set_up(argc, argv, rank, size, st); });
  int go = st.exit_now ? 0 : 1, all_go = 0;
  DMUON_CHECK_MPI(MPI_Allreduce(&go, &all_go, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  if (!all_go) return apps::kOk;
  // Ranks started with different flags or files (an MPMD launch, a node with another version
  // of a config) would run different collectives: every rank leaves with the first difference.
  apps::agree_on_run(MPI_COMM_WORLD, describe_run(st));

  kernels::host::ScopedKokkos kokkos;
  const apps::bench::HostInfo host = host_info(st, rank, size);
  const std::string trace_spans = run_rows(st, rank, size);
  // The table first: a failed write must not lose the run.
  if (rank == 0) print_results(st, size, host);
  if (!st.o.output.empty() && !write_output(st, argc, argv, rank, size, host))
    return apps::kUnexpected;
  if (!st.o.trace.empty() && !write_trace(st, trace_spans, rank, size)) return apps::kUnexpected;
  return apps::bench::failures(st.runs) == 0 ? apps::kOk : apps::kCheckFailed;
}

}  // namespace

int main(int argc, char** argv) {
  return dmuon::apps::run_mpi_main("dmuon_bench", argc, argv, [&] { return bench(argc, argv); });
}
