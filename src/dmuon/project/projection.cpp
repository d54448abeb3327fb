#include "dmuon/project/projection.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "dmuon/base/error.hpp"
#include "dmuon/engine/engine.hpp"
#include "dmuon/engine/step/step_volume.hpp"
#include "dmuon/engine/step/synthetic.hpp"
#include "dmuon/project/op_cost.hpp"
#include "dmuon/project/replay.hpp"

namespace dmuon::project {

using engine::kChannelCount;
using engine::kPhaseCount;
using engine::Phase;

namespace {

// The replayed step's collectives against the formula (engine/step/step_volume.hpp), per rank
// and channel: the formula bytes, the per-channel maxima and the first mismatch.
void audit_channels(const engine::StepVolume& formula, const WorldPrograms& programs,
                    const ReplayResult& rep, engine::RunResult& r) {
  const int world = formula.grid.world();
  const auto W = static_cast<std::size_t>(world);
  r.rank_calls = rep.calls;
  r.rank_bytes = rep.bytes;
  r.rank_formula_bytes.assign(kChannelCount * W, 0);
  for (int q = 0; q < world; ++q) {
    const engine::VolumeExpectation expect = formula.of_rank(q);
    for (std::size_t c = 0; c < kChannelCount; ++c) {
      const std::size_t at = c * W + static_cast<std::size_t>(q);
      r.rank_formula_bytes[at] = expect[c].bytes;
      auto& k = r.kinds[c];
      k.calls_per_step = std::max(k.calls_per_step, rep.calls[at]);
      k.bytes_measured = std::max(k.bytes_measured, rep.bytes[at]);
      k.bytes_formula = std::max(k.bytes_formula, expect[c].bytes);
      if (k.calls_per_step > 0) {
        k.group_size = programs.grid.group_size(engine::channel_group(c));
        k.message_bytes = rep.message_bytes[c];
        k.in_flight_ms = rep.in_flight_ms[c];
      }
      if (r.audit_ok && (rep.calls[at] != expect[c].calls || rep.bytes[at] != expect[c].bytes)) {
        r.audit_ok = false;
        r.audit_message =
            fmt::format("rank {} {}: replayed {} calls / {} bytes, formula {} calls / {} bytes", q,
                        engine::channel_name(c), rep.calls[at], rep.bytes[at], expect[c].calls,
                        expect[c].bytes);
      }
    }
  }
}

// The replayed hooks against the formula's (dmuon: the reference's hooks; the others report
// their own groups and hook calls).
void audit_hooks(const engine::StepVolume& formula, const WorldPrograms& programs,
                 engine::RunResult& r) {
  const bool dm = formula.options.method == engine::Method::dmuon;
  r.hook_sites = dm ? formula.hook_sites : programs.groups;
  r.hook_calls_per_step = programs.hook_calls;
  r.hook_calls_formula = dm ? formula.hooks_fired : programs.hook_calls;
  r.hook_comm_calls_per_step = programs.hook_comm_calls;
  r.hook_comm_calls_formula = dm ? formula.hooks_communicating : programs.hook_comm_calls;
  if (dm && r.audit_ok &&
      (programs.hook_calls != formula.hooks_fired ||
       programs.hook_comm_calls != formula.hooks_communicating)) {
    r.audit_ok = false;
    r.audit_message = fmt::format("{} hooks fired ({} communicating) per step, formula {} ({})",
                                  programs.hook_calls, programs.hook_comm_calls,
                                  formula.hooks_fired, formula.hooks_communicating);
  }
}

// The measured step (the last): per rank its phases, per phase the max over ranks.
void fill_phases(const ReplayResult& rep, int world, engine::RunResult& r) {
  const int step = rep.steps - 1;
  const auto W = static_cast<std::size_t>(world);
  r.rank_phases_ms.resize(W * kPhaseCount);
  for (std::size_t q = 0; q < W; ++q)
    for (std::size_t ph = 0; ph < kPhaseCount; ++ph) {
      const double v = rep.phase_ms(step, static_cast<int>(q), static_cast<Phase>(ph));
      r.rank_phases_ms[q * kPhaseCount + ph] = v;
      r.phases_ms[ph] = std::max(r.phases_ms[ph], v);
    }
}

// Tokens/s, model TFLOP/s per GPU, MFU and HFU of the projected step.
void fill_throughput(const model::ModuleTree& tree, const engine::EngineOptions& o,
                     const ProjectionOptions& options, const Machine& machine, const OpCost& cost,
                     int dp_world, Projection& p) {
  const int world = p.result.world_size;
  const double step_s = p.result.phases_ms[static_cast<std::size_t>(Phase::step)] * 1e-3;
  // --tp: the logical model on the global batch of the DP groups (each TP shard does 1/T).
  const auto tokens = static_cast<double>(o.step.global_samples(dp_world));
  p.model_flops_per_step = options.model_flops_per_token > 0
                               ? options.model_flops_per_token * tokens
                               : model_flops_per_step(tree, o, dp_world);
  if (step_s <= 0) return;
  p.tokens_per_s = tokens / step_s;
  // fp8 runs are scored against the fp8 peak (torchtitan's Float8 MFUs divide by it).
  const double peak =
      o.step.float8() ? fp8_peak_flops(machine) : peak_flops(machine, cost.compute_dtype());
  p.model_tflops_per_gpu = p.model_flops_per_step / (step_s * world) / 1e12;
  p.mfu = p.model_flops_per_step / (step_s * world * peak);
  if (options.hardware_flops_per_token > 0)
    p.hfu = options.hardware_flops_per_token * tokens / (step_s * world * peak);
}

// The engine options a projection runs: one measured step after at least one warm-up, no
// --check; validated for the world.
engine::EngineOptions projected_options(const plan::Plan& plan, const ProjectionOptions& options,
                                        const Machine& machine, int world) {
  engine::EngineOptions o = options.engine;
  // On a GPU the FSDP groups stand for torchtitan's FSDP2 (engine_options.hpp).
  o.step.fsdp2 = machine.device == DeviceKind::gpu;
  o.run.steps = 1;
  o.run.warmup = std::max(1, o.run.warmup);
  o.run.check = false;
  engine::validate(o, world);
  engine::validate_tp_run(plan, o);
  return o;
}

}  // namespace

double model_flops_per_step(const model::ModuleTree& tree, const engine::EngineOptions& o,
                            int world) {
  if (o.step.compute == engine::Compute::none) return 0;
  const std::int64_t global = o.step.global_samples(world);
  double f = 0;
  for (int pid : tree.parameter_order())
    f += 6.0 * static_cast<double>(tree.parameter(pid).numel()) *
         static_cast<double>(engine::param_samples(tree, pid, global));
  return f;
}

Projection project(const model::ModuleTree& tree, const plan::Plan& plan, const Machine& machine,
                   const ProjectionOptions& options) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  const auto& po = plan.partition.options;
  // --tp T: T DP groups of R × G ranks (world_programs.hpp); the DP collectives and their
  // formula are those of one DP group on the local shard shapes.
  const int T = plan.tp.tp;
  const int dp_world = po.shard * po.replicate;
  const int world = dp_world * T;
  const engine::EngineOptions o = projected_options(plan, options, machine, world);
  const int domains = machine.domain_of(world - 1) + 1;
  if (domains > 1 && machine.inter.busbw_gbps <= 0)
    throw InputError(fmt::format(
        "machine '{}' has no inter-node link (network.inter) and holds {} ranks per NVLink "
        "domain: world size {} does not fit (valid: 1..{})",
        machine.name, machine.nvlink_domain, world, machine.nvlink_domain));

  // The collectives' formula first: a model whose volumes overflow 64 bits is refused here,
  // naming its largest parameter, before any layout sums its sizes.
  const auto formula = engine::predict_step_volume(tree, plan, engine::volume_options(o.step));
  require_memory_representable(tree);
  OpCost cost(machine, o, world);
  if (options.free_newton_schulz) cost.without_newton_schulz();
  WorldPrograms programs = build_programs(tree, plan, o, cost, options.symmetry);
  if (options.run_model) programs.run_model = *options.run_model;
  const auto t1 = clock::now();
  const ReplayResult rep =
      replay(programs, machine, o.run.warmup + 1, options.trace, options.grouping);
  const auto t2 = clock::now();

  Projection p;
  p.programs = static_cast<std::int64_t>(programs.programs.size());
  p.chunks = static_cast<std::int64_t>(programs.programs.chunk_count());
  p.chunk_instructions = static_cast<std::int64_t>(programs.programs.instruction_count());
  p.batches = rep.batches;
  p.rank_classes = rep.rank_classes;
  p.rank_class_max = rep.rank_class_max;
  p.build_s = std::chrono::duration<double>(t1 - t0).count();
  p.replay_s = std::chrono::duration<double>(t2 - t1).count();
  auto& r = p.result;
  r.method = o.step.method;
  r.reshard = plan::reshard_name(o.step.reshard);
  r.world_size = world;
  r.replicate = po.replicate;
  r.tp = T;
  fill_phases(rep, world, r);
  // Collectives and hooks of the replayed step against the formula, per rank and channel.
  audit_channels(formula, programs, rep, r);
  audit_hooks(formula, programs, r);
  r.peak_packed_bytes = programs.peak_packed_bytes;
  r.master_bytes = programs.master_bytes;
  r.momentum_bytes = programs.state_bytes;
  p.memory = programs.memory.peak(options.activations);
  fill_throughput(tree, o, options, machine, cost, dp_world, p);
  return p;
}

}  // namespace dmuon::project
