#include "dmuon/engine/engine.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <optional>
#include <vector>

#include "dmuon/base/abbreviate.hpp"
#include "dmuon/base/check.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/comm/abort.hpp"
#include "dmuon/comm/first_message.hpp"
#include "dmuon/comm/rank_groups.hpp"
#include "dmuon/comm/timed_barrier.hpp"
#include "dmuon/comm/unique_comm.hpp"
#include "dmuon/engine/exec/channel_counters.hpp"
#include "dmuon/engine/exec/cuda_backend.hpp"
#include "dmuon/engine/exec/fault_injection.hpp"
#include "dmuon/engine/exec/host_backend.hpp"
#include "dmuon/engine/exec/host_memory.hpp"
#include "dmuon/engine/exec/step_executor.hpp"
#include "dmuon/engine/step/step_layout.hpp"
#include "dmuon/engine/step/step_schedule.hpp"
#include "dmuon/engine/verify/result_collection.hpp"
#include "dmuon/plan/tp_local_tree.hpp"

namespace dmuon::engine {

void validate_run(const model::ModuleTree& tree, const plan::Plan& plan, const EngineOptions& o,
                  int world_size) {
  validate(o, world_size);
  const auto& po = plan.partition.options;
  if (plan.config.reshard != o.step.reshard)
    throw InputError(
        fmt::format("plan made for reshard {}, run with {} (tied parameters take "
                    "other sites in Z2: plan with the run's mode)",
                    plan::reshard_name(plan.config.reshard), plan::reshard_name(o.step.reshard)));
  const int tp = plan.tp.tp;
  if (po.replicate < 1 || po.shard * po.replicate * tp != world_size)
    throw InputError(fmt::format("plan laid out for {} x {} x {} ranks, run on {} (re-plan for {})",
                                 po.replicate, po.shard, tp, world_size, world_size));
  validate_tp_run(plan, o);
  if (o.step.param != kernels::Dtype::f32)
    throw InputError(fmt::format(
        "--param-dtype {} is projected, not run (the engine keeps fp32 masters and optimizer "
        "state; valid here: fp32)",
        dtype_flag_name(o.step.param)));
  if (o.step.stages.active() && tp > 1)
    throw InputError(fmt::format(
        "--pp {} with --tp {}: not run together by the engine yet (dmuon_project projects "
        "them; here --pp with data and expert parallelism)",
        o.step.stages.count, tp));
  if (o.step.stages.active() && o.run.check_reference)
    throw InputError(fmt::format(
        "--pp {}: a reference computed elsewhere cannot check a stage (each stage holds its own "
        "blocks); use --check",
        o.step.stages.count));
  if (plan.config.ep > 1 && o.run.check_reference)
    throw InputError(fmt::format(
        "--ep {}: a reference computed elsewhere cannot check an EP run (each rank's experts "
        "have their own synthetic data); use --check",
        plan.config.ep));
  for (int pid : tree.parameter_order()) {
    const auto& p = tree.parameter(pid);
    if (p.dtype != model::DType::f32)
      throw InputError(fmt::format("parameter '{}' is {}: the engine runs float32 parameters only",
                                   p.name, model::dtype_name(p.dtype)));
    // PyTorch allows an empty parameter, and planning keeps it; the engine's Newton-Schulz
    // needs a matrix with elements. Refused here, before any collective, on every rank alike.
    if (p.numel() == 0 && traits(o.step.method).muon && plan.muon(pid))
      throw InputError(fmt::format(
          "parameter '{}' has shape [{}] (no elements): --method {} cannot run Newton-Schulz on "
          "an empty matrix (valid: Muon parameters with >= 1 element; --method fsdp-adamw runs "
          "it, dmuon_inspect and dmuon_project plan it)",
          abbreviate_value(p.name), fmt::join(p.shape, ", "), method_name(o.step.method)));
  }
  validate_compute(o);
  if (o.backend.device == Device::cuda) require_cuda_backend();
}

void validate_compute(const EngineOptions& o) {
  const bool cuda = o.backend.device == Device::cuda;
  if (!o.step.compute_dtype) return;
  const kernels::Dtype want = cuda ? o.step.wire : kernels::Dtype::f32;
  // fp8 has no kernel here: refused, never run in another type.
  if (o.step.float8() || activation_dtype(*o.step.compute_dtype) != want)
    throw InputError(fmt::format(
        "--compute-dtype {} is invalid on --device {} (valid: {}: the {} computes in {}; fp8 is "
        "dmuon_project's only)",
        compute_dtype_name(*o.step.compute_dtype), device_name(o.backend.device),
        dtype_flag_name(want), cuda ? "CUDA backend" : "host",
        cuda ? "the wire type (--comm-dtype)" : "fp32"));
}

void validate_tp_run(const plan::Plan& plan, const EngineOptions& o) {
  const int tp = plan.tp.tp;
  if (tp == 1) return;
  if (!traits(o.step.method).tensor_parallel)
    throw InputError(fmt::format("--tp {} runs --method dmuon or fsdp-adamw (not {}: no TP step)",
                                 tp, method_name(o.step.method)));
  if (!plan.config.routes.empty())
    throw InputError(
        fmt::format("--tp {} runs without --route (TP shards Muon matrices only)", tp));
  if (o.run.check_reference)
    throw InputError(fmt::format(
        "--tp {}: a reference computed elsewhere cannot check a TP run (its shards have their "
        "own synthetic data); use --check",
        tp));
}

namespace {

// The communicators of a run: the world its plan is laid out for (with --pp, this rank's
// stage), the whole job (steps start and non-finite values end the run together there) and
// with --pp this rank's pipeline group.
struct RunWorlds {
  MPI_Comm world = MPI_COMM_NULL;
  MPI_Comm whole = MPI_COMM_NULL;
  MPI_Comm pipeline = MPI_COMM_NULL;
};

RunResult run_in(const model::ModuleTree& tree, const plan::Plan& plan, const EngineOptions& o,
                 const RunWorlds& worlds) {
  const MPI_Comm world = worlds.world;
  int size = 1;
  DMUON_CHECK_MPI(MPI_Comm_size(world, &size));
  validate_run(tree, plan, o, size);
  const FaultInjection fault = fault_injection_from_env();  // the same on every rank
  check_fault_injection(fault, o.run.total_steps(), size);
  comm::verify_same_on_all_ranks(plan::plan_hash(tree, plan), "DMuon plan", world);
  // --tp: every rank holds the local shards of the TP-sharded parameters.
  const model::ModuleTree local = plan.tp.tp > 1 ? plan::tp_local_tree(tree, plan) : tree;
  const comm::RankGroups groups(world, method_grid(plan, o.step.method), worlds.pipeline);
  const StepLayout layout = make_layout(local, plan, o.step, groups.world_rank());
  const Schedule schedule = make_schedule(layout, o.step);
  if (o.backend.device == Device::host) check_host_memory(layout, world);
  const auto backend = o.backend.device == Device::cuda
                           ? make_cuda_backend(local, layout, o, groups)
                           : make_host_backend(local, layout, o, groups);
  StepExecutor executor(layout, schedule, o.step, *backend, o.run.inject_nan_step);
  executor.inject_fault(fault);
  std::optional<Trace> trace;
  if (o.run.trace) {
    trace.emplace(std::vector<int>{groups.world_rank()}, size, "measured");
    executor.record_into(&*trace);
  }
  ResultCollector results(tree, plan, layout, o, world);
  const StepRunModel run_model = step_run_model(o.step);
  for (long s = 1; s <= o.run.total_steps(); ++s) {
    const ChannelCounters before = channel_counters(*backend);
    // Every step starts together: a rank's lead is reported as step_sync, not as a late root's
    // exposed communication (comm/timed_barrier.hpp). The reference's DMuon step has no
    // barrier: a late owner's broadcast is waited in the next forward (StepRunModel).
    const double sync_ms = run_model.barrier ? comm::timed_barrier_ms(worlds.whole) : 0.0;
    StepMeasure m;
    try {
      m = executor.run_step(s);
    } catch (...) {
      // Peers may be waiting on this rank's collectives: abort, never synchronise, end all.
      end_mid_step_failure(*backend, worlds.whole);
    }
    // A non-finite gradient or weight ends the run on every rank alike (exit 3 with the first
    // rank's message), after the step whose collectives every rank still completed.
    int bad_rank = -1;
    const std::string bad = backend->take_nonfinite();
    const std::string first = comm::agree_first_message(!bad.empty(), bad, worlds.whole, &bad_rank);
    if (!first.empty()) {
      executor.finish();  // the replica batches still in flight complete before buffers go
      throw CheckFailure(fmt::format("rank {}: {}", bad_rank, first));
    }
    m.phases_ms[static_cast<std::size_t>(Phase::step_sync)] = sync_ms;
    results.record(s, m, channel_counters(*backend) - before);
    if (o.run.on_step) o.run.on_step(static_cast<int>(s), o.run.total_steps());
  }
  executor.finish();
  RunResult r = results.finish(*backend);
  if (trace) r.trace_spans = trace->spans_json();
  return r;
}

// --pp: what one stage cannot run ends every stage's ranks alike, before any step (a stage
// left running would wait on its neighbour's sends forever).
void validate_everywhere(const model::ModuleTree& tree, const plan::Plan& plan,
                         const EngineOptions& o, int stage_size, MPI_Comm whole) {
  std::string error;
  try {
    validate_run(tree, plan, o, stage_size);
  } catch (const InputError& e) {
    error = e.what();
  }
  const std::string first = comm::agree_first_message(!error.empty(), error, whole, nullptr);
  if (!first.empty()) throw InputError(first);
}

}  // namespace

int pipeline_stage_size(int world_size, int stages) {
  if (stages < 1 || world_size % stages != 0)
    throw InputError(fmt::format(
        "--pp {} does not divide the {} ranks (valid: a divisor of the world size, each stage "
        "world/P ranks)",
        stages, world_size));
  return world_size / stages;
}

RunResult run_engine(const model::ModuleTree& tree, const plan::Plan& plan, const EngineOptions& o,
                     MPI_Comm world) {
  const PipelineStages& p = o.step.stages;
  if (!p.active()) return run_in(tree, plan, o, RunWorlds{world, world, MPI_COMM_NULL});
  int rank = 0, size = 1;
  DMUON_CHECK_MPI(MPI_Comm_rank(world, &rank));
  DMUON_CHECK_MPI(MPI_Comm_size(world, &size));
  const int stage_size = pipeline_stage_size(size, p.count);
  if (p.stage != pipeline_stage_of(rank, size, p.count))
    throw std::logic_error(fmt::format("run_engine: world rank {} given stage {} (its stage is {})",
                                       rank, p.stage, pipeline_stage_of(rank, size, p.count)));
  validate_everywhere(tree, plan, o, stage_size, world);
  MPI_Comm stage = MPI_COMM_NULL, pipeline = MPI_COMM_NULL;
  DMUON_CHECK_MPI(MPI_Comm_split(world, p.stage, rank, &stage));
  const comm::UniqueComm stage_owner(stage);
  DMUON_CHECK_MPI(MPI_Comm_split(world, rank % stage_size, p.stage, &pipeline));
  const comm::UniqueComm pipeline_owner(pipeline);
  return run_in(tree, plan, o, RunWorlds{stage, world, pipeline});
}

}  // namespace dmuon::engine
