#pragma once
// The audit's independent side: the exact calls and bytes every rank must move per step, per
// channel (group, kind; run_result.hpp), and the hooks that must fire, from the plan by formula
// and never from the schedule. One entry point, predict_step_volume, used by the engine's
// audit, the projection's, the bench record and dmuon_inspect.
//
// Each route's traffic is one term of plan/volume_terms.hpp (its formulas are written there);
// which routes a method uses and the rules that cut across them are applied here, once:
//   * weight passes: every weight collective (dmuon's row broadcasts, the FSDP and sharded_adamw
//     all-gathers) runs twice per micro-step in Z3 (before forward, again before backward) and
//     once in Z2, and K times with --accum K (accumulation.hpp); gradient reduces, HSDP stage 2,
//     the optimizer's collectives and the TP exchange run once per step; with `fsdp2` (Z3 on a
//     projected GPU: StepLayout::stays_gathered) the root unit's all-gathers (the FSDP unit of
//     the parameters no site holds) run once per micro-step: FSDP2 keeps its root unsharded
//     from forward to backward;
//   * hooks (methods with the reference's hooks): all four per site fire every micro-step; the
//     forward-pre and Z3 backward-pre hooks communicate in every weight pass, the backward-post
//     one once per step: fired 4·S·K, communicating (passes + 1)·S for S sites;
//   * --clip-norm: + 1 all_reduce of one fp32 over the world;
//   * types: the weight rows in the wire type (--comm-dtype), the gradient rows (reduces,
//     reduce-scatters, all-reduces, HSDP stage 2) in the reduce type (--reduce-dtype), a
//     --route dtype both (the terms apply it per parameter).
//
//   method      dedicated (owner-based) parameters    the others
//   dmuon       owner_rows                             sharded (--route sharded_adamw: labelled so)
//   fsdp-adamw  sharded                                sharded
//   fsdp-muon   sharded + the optimizer's all_gather   sharded
//   ddp-muon    ddp                                    ddp
//   ddp-dmuon   owner_world                            ddp
//   (dmuon with --tp: + the TP exchange; DP channels on the local shards)

#include <array>
#include <cstdint>
#include <vector>

#include "dmuon/engine/step/engine_options.hpp"
#include "dmuon/engine/step/method.hpp"
#include "dmuon/engine/step/run_result.hpp"
#include "dmuon/model/module_tree.hpp"
#include "dmuon/plan/comm_volume.hpp"
#include "dmuon/plan/plan.hpp"
#include "dmuon/plan/tp_volume.hpp"
#include "dmuon/plan/volume_terms.hpp"

namespace dmuon::engine {

using plan::shard_chunk;

struct VolumeOptions {
  Method method = Method::dmuon;
  /// The plan should be made for the same mode (Plan::config.reshard: a tied parameter's site
  /// differs in Z2).
  plan::Reshard reshard = plan::Reshard::z3;
  plan::GradReduce grad_reduce = plan::GradReduce::per_param;
  int wire_bytes = 0;  ///< --comm-dtype bytes per element; 0: each parameter's own dtype
  /// --reduce-dtype bytes per element, the gradients'; -1: the same as wire_bytes.
  int reduce_bytes = -1;
  int accum = 1;      ///< --accum K
  bool clip = false;  ///< --clip-norm
  /// StepSpec::fsdp2 under Z3: the root unit is gathered once per micro-step, not twice.
  bool fsdp2 = false;
  /// The plan's tensor parallelism: DP channels on local shards plus the TP exchange. false:
  /// the logical model on the DP world (what a plan record describes).
  bool tp = true;
};

/// The options of a run's step.
VolumeOptions volume_options(const StepSpec& step);

struct KindExpectation {
  std::int64_t calls = 0;
  std::int64_t bytes = 0;  ///< volume under the counter convention
};
/// By channel_index(group, kind).
using VolumeExpectation = std::array<KindExpectation, kChannelCount>;

struct StepVolume {
  VolumeOptions options;
  RankGrid grid;  ///< R x G x T (T = 1 unless options.tp)
  /// Per rank per step (0 for the methods without the reference's hooks).
  std::int64_t hooks_fired = 0;
  std::int64_t hooks_communicating = 0;
  /// --ep E < G under dmuon: the expert groups that are DMuon sites (hooked beside the plan's).
  std::int64_t expert_sites = 0;
  /// The plan's hook sites and those: where the reference's hooks are installed.
  std::int64_t hook_sites = 0;
  /// Every route's rows, per step (the rules above applied).
  std::vector<plan::VolumeRow> rows;
  /// The owner-based routes' view (dmuon, ddp-dmuon; empty kinds otherwise): the plan record
  /// and dmuon_inspect.
  plan::CommVolume owners;
  /// With T > 1 (else empty): the TP exchange per world rank, its other directions and
  /// `owners` as `dp`.
  plan::TpCommVolume tp_exchange;

  /// World rank w's expected calls and bytes per channel.
  VolumeExpectation of_rank(int world_rank) const;
  /// The max over ranks of one route's (group, kind).
  KindExpectation max_of(plan::VolumeRoute route, CommGroup group, comm::CollectiveKind kind) const;
};

/// One step of `plan` under `o`. Checked arithmetic: a volume beyond int64 is an InputError
/// naming the parameter or rank.
StepVolume predict_step_volume(const model::ModuleTree& tree, const plan::Plan& plan,
                               const VolumeOptions& o);

}  // namespace dmuon::engine
