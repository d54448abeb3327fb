#pragma once
// The benchmark engine: runs warmup + steps training steps of one method on a topology over
// the ranks of `world` laid out as R rows x G columns x T TP ranks (HSDP when R > 1, tensor
// parallelism when T > 1; base/rank_grid.hpp), on the host (Open MPI +
// Kokkos) or on GPUs (NCCL + CUDA), measuring phases, counting every collective and auditing
// the counts against the exact formulas (step/step_volume.hpp). Optionally checks the final
// weights against a one-process recomputation (reference.hpp).
//
// The pieces, one file each: step_layout (what each rank holds, pure), step_schedule (the
// order of a step as data, pure), step_executor (the one loop that runs a schedule),
// host_backend / cuda_backend (the machines), optimizer_step (the host optimizer math),
// result_collection (reductions over ranks, audit, --check), grad_clip (--clip-norm) and
// accumulation (--accum). Tensor parallelism (docs/METRICS.md): every rank holds the local
// shards of the TP-sharded parameters (plan::tp_local_tree); the DP step runs in each DP
// group on them, and the TP exchange is collectives of the TP group in the schedule.

#include <mpi.h>

#include "dmuon/engine/step/engine_options.hpp"
#include "dmuon/engine/step/run_result.hpp"
#include "dmuon/model/module_tree.hpp"
#include "dmuon/plan/plan.hpp"

namespace dmuon::engine {

/// Throws InputError (identically on all ranks, before any collective) for what the engine
/// cannot run: a plan laid out for another world size, non-fp32 parameters, bad options.
void validate_run(const model::ModuleTree& tree, const plan::Plan& plan, const EngineOptions& o,
                  int world_size);

/// One line (InputError) for a compute dtype the device does not run.
void validate_compute(const EngineOptions& o);

/// One line (InputError) for what the engine does not run under tensor parallelism; nothing
/// when plan.tp.tp == 1.
void validate_tp_run(const plan::Plan& plan, const EngineOptions& o);

/// --pp P (step/pipeline_order.hpp): the ranks of one stage, world_size / P; InputError (one
/// line) when P does not divide the world.
int pipeline_stage_size(int world_size, int stages);

/// Collective over `world`: verifies every rank built the same plan, then runs. With
/// o.step.stages (--pp P) the world is P stages of world/P ranks, stage-major: each rank passes
/// its stage's model and a plan for world/P ranks and o.step.stages.stage = its world rank /
/// (world/P); the run's result is its stage's (RunResult::pipeline_stage). Requires an
/// initialised Kokkos (kernels/scoped_kokkos.hpp). NaN/Inf in a gradient or weight aborts all
/// ranks (comm::abort_all) naming rank, step and parameter.
RunResult run_engine(const model::ModuleTree& tree, const plan::Plan& plan, const EngineOptions& o,
                     MPI_Comm world);

}  // namespace dmuon::engine
