#pragma once
// dmuon_bench --pp P (engine/step/pipeline_order.hpp): the world as P stages of world/P ranks,
// stage-major, each running its blocks of the model (model::pipeline_stage) as a data- (and
// --ep: expert-) parallel world of its own, the micro-batches in 1F1B order across the stage
// boundaries. Each rank plans and runs its stage; rank 0 prints its stage's table and, gathered
// here, every stage's step, boundary traffic, audit and check per row.

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "bench/bench_run.hpp"
#include "dmuon/engine/step/pipeline_order.hpp"
#include "dmuon/model/topology.hpp"
#include "dmuon/work/step_work.hpp"
#include "options/run_options.hpp"

namespace dmuon::apps::bench {

struct BenchPipeline {
  engine::PipelineStages stages;   ///< count 1: no pipeline
  int stage_size = 1;              ///< ranks per stage
  std::vector<std::string> holds;  ///< per stage: what it holds ("layers 0-1, embedding")
  bool active() const { return stages.active(); }
  /// The world a row's plan and results are laid out for: the stage's (the whole world's
  /// without --pp).
  int stage_world(int world_size) const { return active() ? stage_size : world_size; }
};

/// This rank's stage of `world_size` under o.workload.pp (InputError, one line, when P does not
/// divide the world or the model cannot be cut: model::pipeline_stage), its boundary's message
/// from the step work's shape (micro-batch × sequence × hidden, fp32).
BenchPipeline bench_pipeline(const RunOptions& o, const model::Topology& whole,
                             const work::StepWork& work, int world_rank, int world_size);

/// One stage's figures of one row.
struct StageFigures {
  double step_ms = 0;
  double calls = 0;         ///< the boundary's sends and receives per step
  double bytes = 0;         ///< of which this stage sent
  double in_flight_ms = 0;  ///< blocked in them per step
  bool audit_ok = true;
  bool checked = false;
  bool check_passed = true;
  double max_rel_error = 0;
};

/// Collective over the world: every stage's figures of every row, on rank 0 ([row][stage];
/// empty elsewhere). Rows not run have default figures.
std::vector<std::vector<StageFigures>> gather_stage_figures(const std::vector<BenchRun>& runs,
                                                            const BenchPipeline& p);

/// Rank 0: another stage's failed audit or check marks the row's result (its table, verdict
/// and exit status say it too), naming the stage.
void fold_stage_failures(std::vector<BenchRun>& runs,
                         const std::vector<std::vector<StageFigures>>& figures);

/// Rank 0's header lines: the stages, what each holds, the boundary's message, and per row and
/// stage its figures; the table below them is stage 0's.
std::string pipeline_lines(const BenchPipeline& p, const RunOptions& o,
                           const std::vector<BenchRun>& runs,
                           const std::vector<std::vector<StageFigures>>& figures);

/// --json's "pipeline": the stages, what each holds, and per row each stage's figures.
nlohmann::json pipeline_json(const BenchPipeline& p, const std::vector<BenchRun>& runs,
                             const std::vector<std::vector<StageFigures>>& figures);

/// The pipeline's step: the slowest stage's (every stage starts the step together).
double pipeline_step_ms(const std::vector<StageFigures>& stages);

}  // namespace dmuon::apps::bench
