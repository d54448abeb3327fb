#include "dmuon/engine/engine.hpp"

#include <fmt/format.h>

#include "dmuon/base/check.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/comm/abort.hpp"
#include "dmuon/comm/rank_layout.hpp"
#include "dmuon/comm/timed_barrier.hpp"
#include "dmuon/engine/cuda_backend.hpp"
#include "dmuon/engine/host_backend.hpp"
#include "dmuon/engine/result_collection.hpp"
#include "dmuon/engine/step_executor.hpp"
#include "dmuon/engine/step_layout.hpp"
#include "dmuon/engine/step_schedule.hpp"
#include "dmuon/engine/tp_engine.hpp"

namespace dmuon::engine {

void validate_run(const model::ModuleTree& tree, const plan::Plan& plan, const EngineOptions& o,
                  int world_size) {
  validate(o, world_size);
  const auto& po = plan.partition.options;
  if (plan.config.reshard != o.reshard)
    throw InputError(
        fmt::format("plan made for reshard {}, run with {} (tied parameters take "
                    "other sites in Z2: plan with the run's mode)",
                    plan::reshard_name(plan.config.reshard), plan::reshard_name(o.reshard)));
  const int tp = plan.tp.tp;
  if (po.replicate < 1 || po.shard * po.replicate * tp != world_size)
    throw InputError(fmt::format("plan laid out for {} x {} x {} ranks, run on {} (re-plan for {})",
                                 po.replicate, po.shard, tp, world_size, world_size));
  validate_tp_run(plan, o);
  for (int pid : tree.parameter_order()) {
    const auto& p = tree.parameter(pid);
    if (p.dtype != model::DType::f32)
      throw InputError(fmt::format("parameter '{}' is {}: the engine runs float32 parameters only",
                                   p.name, model::dtype_name(p.dtype)));
  }
  if (o.device == Device::cuda) require_cuda_backend();
}

void validate_tp_run(const plan::Plan& plan, const EngineOptions& o) {
  const int tp = plan.tp.tp;
  if (tp == 1) return;
  if (o.method != Method::dmuon)
    throw InputError(
        fmt::format("--tp {} runs --method dmuon only (not {}: the baselines have no TP step)", tp,
                    method_name(o.method)));
  if (o.device != Device::host)
    throw InputError(fmt::format(
        "--tp {} runs on --device host only (the CUDA backend has no TP gather/scatter)", tp));
  if (!plan.config.routes.empty())
    throw InputError(
        fmt::format("--tp {} runs without --route (TP shards Muon matrices only)", tp));
  if (o.check_reference)
    throw InputError(fmt::format(
        "--tp {}: a reference computed elsewhere cannot check a TP run (its shards have their "
        "own synthetic data); use --check",
        tp));
}

RunResult run_engine(const model::ModuleTree& tree, const plan::Plan& plan, const EngineOptions& o,
                     MPI_Comm world) {
  if (plan.tp.tp > 1) return run_tp_engine(tree, plan, o, world);
  int size = 1;
  DMUON_CHECK_MPI(MPI_Comm_size(world, &size));
  validate_run(tree, plan, o, size);
  comm::verify_same_on_all_ranks(plan::plan_hash(tree, plan), "DMuon plan", world);
  const comm::RankLayout ranks(world, plan.partition.options.replicate);
  const StepLayout layout = make_layout(tree, plan, layout_options(o), ranks.world_rank());
  const ScheduleOptions so = schedule_options(o);
  const Schedule schedule = make_schedule(layout, so);
  const auto backend = o.device == Device::cuda ? make_cuda_backend(tree, layout, o, ranks, world)
                                                : make_host_backend(tree, layout, o, ranks, world);
  StepExecutor executor(layout, schedule, so, *backend, o.inject_nan_step);
  ResultCollector results(tree, plan, layout, o, world);
  const comm::CollectiveCounters none;
  auto counters = [&](CommGroup g) -> comm::CollectiveCounters {
    const comm::Communicator* c = backend->comm(g);
    return c ? c->counters() : none;
  };
  for (long s = 1; s <= o.total_steps(); ++s) {
    const auto shard_before = counters(CommGroup::shard);
    const auto replicate_before = counters(CommGroup::replicate);
    const auto world_before = counters(CommGroup::world);
    // Every step starts together: a rank's lead is reported as step_sync, not as a late root's
    // exposed communication (comm/timed_barrier.hpp).
    const double sync_ms = comm::timed_barrier_ms(world);
    StepMeasure m = executor.run_step(s);
    m.phases_ms[static_cast<std::size_t>(Phase::step_sync)] = sync_ms;
    results.record(s, m, counters(CommGroup::shard) - shard_before,
                   counters(CommGroup::replicate) - replicate_before,
                   counters(CommGroup::world) - world_before);
    if (o.on_step) o.on_step(static_cast<int>(s), o.total_steps());
  }
  executor.finish();
  return results.finish(*backend);
}

}  // namespace dmuon::engine
