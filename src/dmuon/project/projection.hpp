#pragma once
// One projected run: the engine's step schedule of every rank of a modelled world
// (world_programs.hpp), replayed on a machine model (replay.hpp), reduced exactly as
// dmuon_bench reduces what it measures (per step the max over ranks, then the median over the
// measured steps; the replay is deterministic, so one measured step after the warm-up), into
// the engine's RunResult so that the bench's table, JSON and results records apply unchanged.
// Collective calls and bytes are counted from the replayed batches per rank and audited
// against the closed-form formula (engine/step/step_volume.hpp) like a measured run.
//
// Throughput figures (docs/PROJECTION.md):
//   model FLOPs per step  = Σ_p 6 · numel_p · n_p   (n_p: global samples of parameter p: the
//                           forward GEMM 2·n·numel, the backward's two 4·n·numel)
//   MFU                   = model FLOPs / (step time · world · peak FLOP/s of the compute dtype)
//   tokens/s              = global samples per step / step time

#include <cstdint>
#include <optional>

#include "dmuon/base/trace.hpp"
#include "dmuon/engine/step/engine_options.hpp"
#include "dmuon/engine/step/run_result.hpp"
#include "dmuon/model/module_tree.hpp"
#include "dmuon/plan/plan.hpp"
#include "dmuon/project/machine_model.hpp"
#include "dmuon/project/memory_model.hpp"
#include "dmuon/project/replay.hpp"
#include "dmuon/project/world_programs.hpp"

namespace dmuon::project {

struct ProjectionOptions {
  /// method, reshard, grad_reduce, prefetch, comm_dtype, ns, ns_dtype, pipeline, compute,
  /// tokens / global_tokens, accum, clip_norm are used; steps is forced to 1 and warmup to at
  /// least 1.
  engine::EngineOptions engine;
  Symmetry symmetry = Symmetry::reduced;
  /// Model FLOPs per text token under the run's convention (work/flop_convention.hpp) and the
  /// hardware FLOPs per token the step runs (recompute counted: HFU); 0 = the parameter rule
  /// of model_flops_per_step, no HFU.
  double model_flops_per_token = 0;
  double hardware_flops_per_token = 0;
  /// Activations of one micro-batch per rank (memory_model.hpp); not modelled: none counted.
  ActivationMemory activations;
  /// Where the replay records the timeline of the trace's ranks (trace.hpp); none: no trace.
  Trace* trace = nullptr;
  /// Rank classes (the default) or every rank alone (replay.hpp; tests compare the two).
  ReplayGrouping grouping = ReplayGrouping::rank_classes;
  /// Counterfactuals (cost_vs_adamw.hpp): the replay's run model instead of the schedule's
  /// (engine::step_run_model), and Newton–Schulz at no cost.
  std::optional<engine::StepRunModel> run_model;
  bool free_newton_schulz = false;
};

struct Projection {
  engine::RunResult result;  ///< steps = 1 measured step; rank arrays filled as on rank 0
  double model_flops_per_step = 0;
  double mfu = 0;
  double hfu = 0;  ///< 0 without the step work's hardware FLOPs
  double tokens_per_s = 0;
  double model_tflops_per_gpu = 0;  ///< model FLOP/s per rank / 1e12
  /// Device memory of the rank with the largest peak (docs/MEMORY.md).
  RankMemory memory;
  std::int64_t programs = 0;            ///< distinct compiled programs (rank symmetry at work)
  std::int64_t chunks = 0;              ///< distinct program chunks (program_store.hpp)
  std::int64_t chunk_instructions = 0;  ///< the instructions they hold
  std::int64_t batches = 0;             ///< batches replayed
  std::int64_t rank_classes = 0;        ///< rank classes the replay formed (replay.hpp)
  std::int64_t rank_class_max = 0;      ///< of those, the most alive at once
  double build_s = 0, replay_s = 0;     ///< wall time of the projection itself
};

/// Throws InputError for what the machine cannot hold (a world spanning several NVLink
/// domains on a machine without an inter-domain link) and for invalid engine options.
Projection project(const model::ModuleTree& tree, const plan::Plan& plan, const Machine& machine,
                   const ProjectionOptions& options);

/// Σ_p 6 · numel_p · n_p (see above); 0 with --compute none.
double model_flops_per_step(const model::ModuleTree& tree, const engine::EngineOptions& o,
                            int world);

}  // namespace dmuon::project
