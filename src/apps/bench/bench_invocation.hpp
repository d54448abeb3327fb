#pragma once
// One dmuon_bench invocation, in the order main() runs it: the set-up every rank does before
// the first collective (options, model, sweep, rows, plans), the description the ranks agree
// on, the machine's description, the measured rows, and what rank 0 prints and writes.

#include <optional>
#include <string>
#include <vector>

#include "bench/bench_output.hpp"
#include "bench/bench_pipeline.hpp"
#include "bench/bench_run.hpp"
#include "common/run_agreement.hpp"
#include "dmuon/model/topology.hpp"
#include "dmuon/plan/plan.hpp"
#include "dmuon/work/step_work.hpp"
#include "options/run_options.hpp"

namespace dmuon::apps::bench {

/// Everything an invocation decides before its first collective.
struct Invocation {
  bool exit_now = false;  ///< --help, --version, --list: done
  RunOptions o;
  std::optional<model::Topology> topo;
  std::optional<work::StepWork> step_work;  ///< --seq-len: the model's activation work
  /// --seq-len on a model with a geometry: the whole model's FLOPs per token under --flops
  /// (never the EP rank's tree: its experts are a part); else 0.
  double model_flops_per_token = 0;
  std::string sweep_source = "--boundary";
  std::vector<plan::Plan> plans;
  std::vector<BenchRun> runs;
  /// --pp: this rank's stage (topo, plans and runs are its stage's).
  BenchPipeline pipeline;
  /// --pp, rank 0: every stage's figures per row (gathered after the runs).
  std::vector<std::vector<StageFigures>> stage_figures;
};

/// Parses the options and builds the rows and their plans (InputError on bad input).
void set_up(int argc, char** argv, int rank, int size, Invocation& st);

/// What every rank must have resolved alike: the options, the model, the rows and their plans.
RunDescription describe_run(const Invocation& st);

/// The host's BLAS, measured sgemm rate and names (collective); rank 0 warns of a generic BLAS.
HostInfo host_info(const Invocation& st, int rank);

/// Runs every row o.repeats times, interleaved; returns the first repeat's timeline of the first
/// row (--trace).
std::string run_rows(Invocation& st, int rank, int size);

/// Rank 0: the JSON object, or the table with the step work and throughput lines.
void print_results(const Invocation& st, int size, const HostInfo& host);

/// Collective: rank 0 writes the results file (or the trace); every rank learns whether it worked.
bool write_output(const Invocation& st, int argc, char** argv, int rank, int size,
                  const HostInfo& host);
bool write_trace(const Invocation& st, const std::string& spans, int rank, int size);

}  // namespace dmuon::apps::bench
