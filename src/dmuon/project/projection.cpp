#include "dmuon/project/projection.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>

#include "dmuon/base/error.hpp"
#include "dmuon/engine/engine.hpp"
#include "dmuon/engine/step/accumulation.hpp"
#include "dmuon/engine/step/baseline_volume.hpp"
#include "dmuon/engine/step/synthetic.hpp"
#include "dmuon/plan/ddp_dmuon_volume.hpp"
#include "dmuon/plan/tp_local_tree.hpp"
#include "dmuon/plan/tp_volume.hpp"
#include "dmuon/project/op_cost.hpp"
#include "dmuon/project/replay.hpp"

namespace dmuon::project {

using engine::kChannelCount;
using engine::kPhaseCount;
using engine::Phase;

namespace {

// The formula's calls and bytes of every rank (engine::expected_volume). It walks every
// parameter for every rank; at scale only the DMuon channels (broadcast and reduce on both
// groups, which expected_volume takes from the per-rank prediction alone) differ between
// ranks, so they are swapped into rank 0's expectation, and a few ranks are checked exactly.
std::vector<engine::VolumeExpectation> expected_by_rank(const model::ModuleTree& tree,
                                                        const plan::Plan& plan,
                                                        const engine::EngineOptions& o,
                                                        const plan::CommVolume& predicted,
                                                        int world, int wire) {
  const auto& po = plan.partition.options;
  auto exact = [&](int q) {
    return engine::expected_volume(o.step.method, o.step.reshard, tree, plan, predicted, q,
                                   po.shard, po.replicate, wire, o.step.accum,
                                   o.step.clip_norm > 0);
  };
  // --accum: dmuon's row broadcasts × K (engine/step/accumulation.hpp), as expected_volume does.
  const plan::CommVolume per_step = o.step.method == engine::Method::dmuon
                                        ? engine::accumulated_volume(predicted, o.step.accum)
                                        : predicted;
  std::vector<engine::VolumeExpectation> out;
  out.reserve(static_cast<std::size_t>(world));
  constexpr int kExactUpTo = 1024;
  if (world <= kExactUpTo) {
    for (int q = 0; q < world; ++q) out.push_back(exact(q));
    return out;
  }
  using comm::CollectiveKind;
  using engine::CommGroup;
  const std::pair<std::size_t, const plan::KindVolume*> dmuon_channels[] = {
      {engine::channel_index(CommGroup::shard, CollectiveKind::broadcast), &per_step.broadcast},
      {engine::channel_index(CommGroup::shard, CollectiveKind::reduce), &per_step.reduce},
      {engine::channel_index(CommGroup::replicate, CollectiveKind::reduce),
       &per_step.reduce_stage2},
      {engine::channel_index(CommGroup::replicate, CollectiveKind::broadcast),
       &per_step.replicate_broadcast}};
  const auto base = exact(0);
  for (int q = 0; q < world; ++q) {
    auto v = base;
    if (o.step.method == engine::Method::dmuon || o.step.method == engine::Method::ddp_dmuon)
      for (const auto& [c, kind] : dmuon_channels) {
        const auto at = static_cast<std::size_t>(q);
        v[c].calls = kind->calls_per_rank.empty() ? 0 : kind->calls_per_rank.at(at);
        v[c].bytes = kind->bytes_per_rank.empty() ? 0 : kind->bytes_per_rank.at(at);
      }
    out.push_back(v);
  }
  for (int q : {1, world / 2, world - 1}) {
    const auto e = exact(q);
    for (std::size_t c = 0; c < kChannelCount; ++c)
      if (e[c].calls != out[static_cast<std::size_t>(q)][c].calls ||
          e[c].bytes != out[static_cast<std::size_t>(q)][c].bytes)
        throw RuntimeFailure(fmt::format(
            "projection: the formula of rank {} differs from rank 0's outside the DMuon "
            "channels ({})",
            q, engine::channel_name(c)));
  }
  return out;
}

// --tp: the TP exchange's channels of every world rank (plan/tp_volume.hpp) into the
// per-rank expectations.
void expect_tp(std::vector<engine::VolumeExpectation>& by_world_rank, const model::ModuleTree& tree,
               const plan::Plan& plan, const engine::EngineOptions& o) {
  const auto v = plan::predict_tp_volume(tree, plan, o.step.reshard, o.step.grad_reduce,
                                         static_cast<int>(kernels::dtype_bytes(o.step.wire)));
  using comm::CollectiveKind;
  const auto gather = engine::channel_index(engine::CommGroup::tp, CollectiveKind::gather);
  const auto scatter = engine::channel_index(engine::CommGroup::tp, CollectiveKind::scatter);
  for (std::size_t q = 0; q < by_world_rank.size(); ++q) {
    by_world_rank[q][gather] = {v.gather.calls_per_rank[q], v.gather.bytes_per_rank[q]};
    by_world_rank[q][scatter] = {v.scatter.calls_per_rank[q], v.scatter.bytes_per_rank[q]};
  }
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
  engine::EngineOptions o = options.engine;
  o.run.steps = 1;
  o.run.warmup = std::max(1, o.run.warmup);
  o.run.check = false;
  engine::validate(o, world);
  engine::validate_tp_run(plan, o);
  std::optional<model::ModuleTree> local_tree;
  if (T > 1) local_tree.emplace(plan::tp_local_tree(tree, plan));
  const model::ModuleTree& dp_tree = local_tree ? *local_tree : tree;
  const int domains = machine.domain_of(world - 1) + 1;
  if (domains > 1 && machine.inter.busbw_gbps <= 0)
    throw InputError(fmt::format(
        "machine '{}' has no inter-node link (network.inter) and holds {} ranks per NVLink "
        "domain: world size {} does not fit (valid: 1..{})",
        machine.name, machine.nvlink_domain, world, machine.nvlink_domain));

  const OpCost cost(machine, o, world);
  const WorldPrograms programs = build_programs(tree, plan, o, cost, options.symmetry);
  const auto t1 = clock::now();
  const ReplayResult rep = replay(programs, machine, o.run.warmup + 1, options.trace);
  const auto t2 = clock::now();

  Projection p;
  p.programs = static_cast<std::int64_t>(programs.programs.size());
  p.chunks = static_cast<std::int64_t>(programs.programs.chunk_count());
  p.chunk_instructions = static_cast<std::int64_t>(programs.programs.instruction_count());
  p.batches = rep.batches;
  p.build_s = std::chrono::duration<double>(t1 - t0).count();
  p.replay_s = std::chrono::duration<double>(t2 - t1).count();
  auto& r = p.result;
  r.method = o.step.method;
  r.reshard = plan::reshard_name(o.step.reshard);
  r.world_size = world;
  r.replicate = po.replicate;
  r.tp = T;
  // The measured step: the last; per phase the max over ranks (one step: its median).
  const int step = rep.steps - 1;
  const auto W = static_cast<std::size_t>(world);
  r.rank_phases_ms.resize(W * kPhaseCount);
  for (std::size_t q = 0; q < W; ++q)
    for (std::size_t ph = 0; ph < kPhaseCount; ++ph) {
      const double v = rep.phase_ms(step, static_cast<int>(q), static_cast<Phase>(ph));
      r.rank_phases_ms[q * kPhaseCount + ph] = v;
      r.phases_ms[ph] = std::max(r.phases_ms[ph], v);
    }
  // Collectives of the replayed step against the formula, per rank and channel.
  const int wire = static_cast<int>(kernels::dtype_bytes(o.step.wire));
  // ddp-dmuon: its own prediction (the owners' reduce and post-step broadcast) fills the
  // per-rank channels; expected_volume reads only its grad_reduce.
  const auto raw_predicted =
      o.step.method == engine::Method::ddp_dmuon
          ? plan::predict_ddp_dmuon_volume(dp_tree, plan.hooks, plan.partition, o.step.grad_reduce,
                                           wire, &plan.route_wire_bytes)
          : plan::predict_dmuon_volume(dp_tree, plan.hooks, plan.partition, o.step.reshard,
                                       o.step.grad_reduce, wire, nullptr, &plan.route_wire_bytes);
  r.rank_calls = rep.calls;
  r.rank_bytes = rep.bytes;
  r.rank_formula_bytes.assign(kChannelCount * W, 0);
  // Per world rank: its DP rank's (q / T) DP channels and, with --tp, its TP exchange.
  const auto per_dp = expected_by_rank(dp_tree, plan, o, raw_predicted, dp_world, wire);
  std::vector<engine::VolumeExpectation> expected;
  expected.reserve(W);
  for (int q = 0; q < world; ++q) expected.push_back(per_dp[static_cast<std::size_t>(q / T)]);
  if (T > 1) expect_tp(expected, tree, plan, o);
  // Hooks per step with --accum (engine/step/accumulation.hpp).
  const auto predicted = o.step.method == engine::Method::dmuon
                             ? engine::accumulated_volume(raw_predicted, o.step.accum)
                             : raw_predicted;
  for (int q = 0; q < world; ++q) {
    const auto& expect = expected[static_cast<std::size_t>(q)];
    for (std::size_t c = 0; c < kChannelCount; ++c) {
      const std::size_t at = c * W + static_cast<std::size_t>(q);
      r.rank_formula_bytes[at] = expect[c].bytes;
      auto& k = r.kinds[c];
      k.calls_per_step = std::max(k.calls_per_step, rep.calls[at]);
      k.bytes_measured = std::max(k.bytes_measured, rep.bytes[at]);
      k.bytes_formula = std::max(k.bytes_formula, expect[c].bytes);
      if (k.calls_per_step > 0) k.group_size = programs.grid.group_size(engine::channel_group(c));
      if (r.audit_ok && (rep.calls[at] != expect[c].calls || rep.bytes[at] != expect[c].bytes)) {
        r.audit_ok = false;
        r.audit_message =
            fmt::format("rank {} {}: replayed {} calls / {} bytes, formula {} calls / {} bytes", q,
                        engine::channel_name(c), rep.calls[at], rep.bytes[at], expect[c].calls,
                        expect[c].bytes);
      }
    }
  }
  const bool dm = o.step.method == engine::Method::dmuon;
  r.hook_sites = dm ? static_cast<std::int64_t>(plan.hooks.sites.size()) : programs.groups;
  r.hook_calls_per_step = programs.hook_calls;
  r.hook_calls_formula = dm ? predicted.hooks_fired : programs.hook_calls;
  r.hook_comm_calls_per_step = programs.hook_comm_calls;
  r.hook_comm_calls_formula = dm ? predicted.hooks_communicating : programs.hook_comm_calls;
  if (dm && r.audit_ok &&
      (programs.hook_calls != predicted.hooks_fired ||
       programs.hook_comm_calls != predicted.hooks_communicating)) {
    r.audit_ok = false;
    r.audit_message = fmt::format("{} hooks fired ({} communicating) per step, formula {} ({})",
                                  programs.hook_calls, programs.hook_comm_calls,
                                  predicted.hooks_fired, predicted.hooks_communicating);
  }
  r.peak_packed_bytes = programs.peak_packed_bytes;
  r.master_bytes = programs.master_bytes;
  r.momentum_bytes = programs.state_bytes;
  p.memory = programs.memory.peak(options.activations);

  const double step_s = r.phases_ms[static_cast<std::size_t>(Phase::step)] * 1e-3;
  // --tp: the logical model on the global batch of the DP groups (each TP shard does 1/T).
  const auto tokens = static_cast<double>(o.step.global_samples(dp_world));
  p.model_flops_per_step = options.model_flops_per_token > 0
                               ? options.model_flops_per_token * tokens
                               : model_flops_per_step(tree, o, dp_world);
  if (step_s > 0) {
    p.tokens_per_s = tokens / step_s;
    const double peak = peak_flops(machine, cost.compute_dtype());
    p.model_tflops_per_gpu = p.model_flops_per_step / (step_s * world) / 1e12;
    p.mfu = p.model_flops_per_step / (step_s * world * peak);
    if (options.hardware_flops_per_token > 0)
      p.hfu = options.hardware_flops_per_token * tokens / (step_s * world * peak);
  }
  return p;
}

}  // namespace dmuon::project
