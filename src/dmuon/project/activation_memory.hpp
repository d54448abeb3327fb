#pragma once
// Activation memory of one micro-batch on one rank (docs/MEMORY.md "Activations"): what
// autograd keeps from the forward for the backward, from the step work's ops
// (work::Op::saved_bytes: each op's saved inputs, outputs and side tensors, every tensor
// counted once per unit), under the activation-checkpointing policy of the run:
//
//   none             every op's saved bytes
//   full             per block its input (the checkpoint); while a block runs its backward,
//   selective-layer  its full saved set again (the recompute); selective-layer: every 2nd block
//   selective        torchtitan's per-op SAC: the checkpoint plus the outputs of the ops the
//                    policy saves (odd matmuls, attention); the rest is recreated in backward
//   core-attn        every op's saved bytes less the attention's log-sum-exp (recomputed)
//
// plus, per unit, the largest gradient one of its backward ops writes (live beside the saved
// set while it runs: the loss's gradient over the vocabulary is the largest in an LLM; it
// runs first, before any gradient travels).

#include <cstdint>

#include "dmuon/work/step_work.hpp"

namespace dmuon::project {

/// Activation bytes of one micro-batch on one rank (from the step work).
struct ActivationMemory {
  /// Kept for backward at the end of forward, summed over the work units.
  std::int64_t saved = 0;
  /// The most a unit holds beyond `saved` while its backward runs: its recomputed tensors and
  /// the largest gradient one of its backward ops writes (max over units).
  std::int64_t recompute = 0;
  /// The unit whose backward runs first (the head: the loss over the vocabulary): what it keeps
  /// and what its backward adds. No gradient travels yet then; by the time one does, its saved
  /// tensors are freed. `rest_live`: the largest `recompute` of the other units.
  std::int64_t first_saved = 0, first_live = 0, rest_live = 0;
  bool modelled = false;  ///< false: no step work (--seq-len not given): activations count 0

  /// What backward holds beyond `saved` and the rank's `grad_buffers` at its peak: the larger
  /// of the first unit's backward (no gradient travelling yet) and any later unit's (the first
  /// unit's tensors freed, `grad_buffers` travelling); 0 when neither exceeds them.
  std::int64_t backward_extra(std::int64_t grad_buffers) const;
};

/// The activation memory of `work` (see ActivationMemory; the rule and why: docs/MEMORY.md).
ActivationMemory activation_memory(const work::StepWork& work);

}  // namespace dmuon::project
