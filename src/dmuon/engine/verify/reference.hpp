#pragma once
// One-process recomputation of a run for --check: the same global batch (synthetic.hpp with
// G = 1, all samples), the full averaged gradient, and the method's optimizer math
// (Muon on dedicated parameters except for fsdp-adamw, AdamW elsewhere), on full weights.
// Under tensor parallelism (plan.tp.tp = T > 1) every TP shard is its own synthetic Linear of
// the local shape (tp_shard_key); the reference runs all T shards and Newton–Schulz on the
// logical matrix they assemble to (each shard's Nesterov input rounded to the wire type first,
// as the TP gather sends it), and returns TP rank t's weights. Under expert parallelism the
// same for each EP rank's experts (reference_weights).

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dmuon/engine/step/engine_options.hpp"
#include "dmuon/model/module_tree.hpp"
#include "dmuon/plan/plan.hpp"

namespace dmuon::engine {

/// AdamW elements whose reference gradient cancelled to the rounding level at some step.
///
/// AdamW's first-moment/second-moment ratio is a sign for |g| ≫ eps and ~g/eps below: where the
/// terms of a gradient element cancel (|g| at the level of float rounding of the sum), another
/// summation order, e.g. the ranks' reduce, is as right as the reference's and can move that
/// element by up to 2·lr more or less in that step. Such an element is ill-conditioned, not
/// wrong; --check excuses it up to that bound and says so in its note.
struct AdamwEpsRegime {
  /// Flagged when 0 < |g| ≤ kRelative · rms(g) of its parameter at a step (an exact zero has
  /// nothing to cancel: every summation order gives 0).
  static constexpr double kRelative = 1e-5;
  /// Per parameter in parameter_order(): (element, steps at which it was flagged).
  std::vector<std::vector<std::pair<std::int64_t, int>>> elements;
  /// 2 · lr · max over the run's steps of AdamW's largest |m̂|/sqrt(v̂) (1 for short runs):
  /// the most one step can move such an element differently.
  double bound_per_step = 0;
};

/// Final weights after o.total_steps() steps, per parameter in tree.parameter_order() (with
/// TP: of plan::tp_local_tree's, TP rank `tp_rank`'s shard of a TP-sharded one); `dp_size` is
/// the R x G ranks the global batch is counted for (o.global_samples). `regime` (optional)
/// receives the AdamW elements in the eps regime. --ep E (plan.config.ep; `tree` an EP rank's,
/// model/expert_local_tree.hpp): every local expert is computed for all E EP ranks (each its
/// own synthetic Linear keyed by its name in the full model, expert_data_key), the clip norm
/// over all of them, and EP rank `ep_rank`'s are returned.
std::vector<std::vector<float>> reference_weights(const model::ModuleTree& tree,
                                                  const plan::Plan& plan, const EngineOptions& o,
                                                  int dp_size, AdamwEpsRegime* regime = nullptr,
                                                  int tp_rank = 0, int ep_rank = 0);

/// Max over parameters of ‖a − b‖_F / ‖b‖_F (Frobenius, so AdamW's isolated sign flips on
/// near-zero gradients do not dominate); `worst` names the worst parameter. With `excuse`,
/// an element it flags whose difference is within its bound (bound_per_step × flagged steps)
/// leaves the difference out; `excused` counts those that moved by more than 1 % of the bound.
double max_relative_error(const model::ModuleTree& tree, const std::vector<std::vector<float>>& a,
                          const std::vector<std::vector<float>>& b, std::string* worst = nullptr,
                          const AdamwEpsRegime* excuse = nullptr, std::int64_t* excused = nullptr);

}  // namespace dmuon::engine
