#pragma once
// The vocabulary of a step schedule: every operation, and in one table what each one is to
// the interpreters that run a schedule (the executor of the host and CUDA backends, the
// projection's compile_program): its class, the batch slot it fills or waits for, the CUDA
// stream its collectives run on, whether it blocks. Adding an op is one enum entry and one
// table row here, then the backends' kernel for a compute op (docs/ARCHITECTURE.md).

#include <cstdint>

#include "dmuon/base/rank_grid.hpp"
#include "dmuon/engine/step/phase.hpp"

namespace dmuon::engine {

enum class Op {
  take_replica,     ///< HSDP dmuon: complete the previous step's replicate broadcast of g
  pack,             ///< fill the send side of g's weight collective (cast / copy masters)
  issue_weights,    ///< shard group: packed broadcasts (dmuon) or all-gathers (fsdp) of g
  wait_weights,     ///< g's weights are in its slot
  forward,          ///< forward compute of one parameter
  release_weights,  ///< compute no longer reads g's weight slot (it may be refilled)
  backward,         ///< backward compute of one parameter, gradient into its buffer
  issue_reduce,     ///< stage 1: reduces to owners / reduce-scatters / DDP all-reduces of g
  wait_reduce,      ///< g's stage 1 completed (its pooled gradients may be reused)
  issue_stage2,     ///< HSDP, replicate group: after g's stage 1 (an ordering, not a wait)
  wait_stage2,
  prepare,       ///< optimizer: momentum of g's Muon parameters updated here
  issue_gather,  ///< fsdp-muon: all-gather of g's Nesterov inputs
  wait_gather,
  newton_schulz,  ///< one parameter
  apply,          ///< one parameter: Muon update or AdamW step
  publish,        ///< g's owners' fp32 masters broadcast (HSDP column; ddp-dmuon replicas)
  hook,           ///< a communication hook fires (counted, not timed)
  // --clip-norm (grad_clip.hpp), once per step after every gradient reduce was waited:
  clip_partial,  ///< this rank's part of ‖g‖ (sum of squares or max) of what it counts
  issue_clip,    ///< all-reduce (sum or max) of that one fp32 scalar over the world
  wait_clip,
  clip_scale,  ///< every gradient the optimizer consumes here × min(1, X / (‖g‖ + 1e-6))
  // --tp, one TP-sharded parameter each, on its DP owner's TP group (docs/METRICS.md):
  tp_stage,     ///< its Nesterov input shard onto the gather's wire (tp_send)
  tp_gather,    ///< gather of the T shards to the TP owner (tp_recv): blocking
  tp_assemble,  ///< TP owner: the logical matrix (tp_matrix) from the gathered shards
  tp_split,     ///< TP owner: the Newton–Schulz output cut back into T shards
  tp_scatter,   ///< scatter of the fp32 shards into each rank's Nesterov input: blocking
  // The activation work of one work unit (param = its index in ActivationWork::units):
  act_forward,    ///< its forward ops (attention, norms, activations, ...), after g's forward
  act_recompute,  ///< what its checkpointing policy recomputes, before its backward
  act_backward,   ///< its backward ops, before g's parameters' backward
  // --pp (pipeline_order.hpp), one micro-batch (StepOp::micro) each, on the pipeline group:
  pp_recv_activations,  ///< from the previous stage, before the micro-batch's forward
  pp_send_activations,  ///< to the next stage, after its forward (in flight to the step's end)
  pp_recv_gradients,    ///< their gradients from the next stage, before its backward
  pp_send_gradients,    ///< to the previous stage, after its backward (in flight)
};
inline constexpr std::size_t kOpCount = 34;

/// What an op is to an interpreter.
enum class OpClass : std::uint8_t {
  compute,      ///< a backend kernel, timed (its duration in the projection)
  issue,        ///< starts a batch of collectives (collectives_of)
  wait,         ///< completes the batch its slot holds
  hook,         ///< counted, not timed
  bookkeeping,  ///< nothing to run (release_weights)
  p2p,          ///< a pipeline stage's send or receive (StepBackend::pipeline_transfer)
};

/// The per-group batch slots an executor keeps (an issue fills one, a wait completes it).
enum class BatchSlot : std::int8_t {
  none = -1,
  weights,
  reduce,
  stage2,
  gather,
  replica,
  clip,
  tp,  ///< the blocking TP exchange: waited where it is issued
};
inline constexpr int kBatchSlotCount = 7;

/// The CUDA backend's communication streams (the projection's replay models the same).
enum class Stream : std::uint8_t { weights = 0, reduce = 1, replicate = 2 };
inline constexpr int kStreamCount = 3;

struct OpTraits {
  const char* name;
  OpClass cls;
  BatchSlot slot;  ///< issue: the slot it fills; wait: the slot it completes
  Stream stream;   ///< issue: where its batch runs
  bool blocking;   ///< issue: waited at once (nothing stays in flight)
  /// issue: ordered after the batch in this slot of its group only (HSDP stage 2 after stage
  /// 1), not after the compute queue.
  BatchSlot after = BatchSlot::none;
};

inline constexpr OpTraits op_traits(Op op) {
  using C = OpClass;
  using B = BatchSlot;
  using S = Stream;
  switch (op) {
    case Op::take_replica: return {"take_replica", C::wait, B::replica, S::weights, false};
    case Op::pack: return {"pack", C::compute, B::none, S::weights, false};
    case Op::issue_weights: return {"issue_weights", C::issue, B::weights, S::weights, false};
    case Op::wait_weights: return {"wait_weights", C::wait, B::weights, S::weights, false};
    case Op::forward: return {"forward", C::compute, B::none, S::weights, false};
    case Op::release_weights:
      return {"release_weights", C::bookkeeping, B::none, S::weights, false};
    case Op::backward: return {"backward", C::compute, B::none, S::weights, false};
    case Op::issue_reduce: return {"issue_reduce", C::issue, B::reduce, S::reduce, false};
    case Op::wait_reduce: return {"wait_reduce", C::wait, B::reduce, S::weights, false};
    case Op::issue_stage2:
      return {"issue_stage2", C::issue, B::stage2, S::replicate, false, B::reduce};
    case Op::wait_stage2: return {"wait_stage2", C::wait, B::stage2, S::weights, false};
    case Op::prepare: return {"prepare", C::compute, B::none, S::weights, false};
    case Op::issue_gather: return {"issue_gather", C::issue, B::gather, S::weights, false};
    case Op::wait_gather: return {"wait_gather", C::wait, B::gather, S::weights, false};
    case Op::newton_schulz: return {"newton_schulz", C::compute, B::none, S::weights, false};
    case Op::apply: return {"apply", C::compute, B::none, S::weights, false};
    case Op::publish: return {"publish", C::issue, B::replica, S::replicate, false};
    case Op::hook: return {"hook", C::hook, B::none, S::weights, false};
    case Op::clip_partial: return {"clip_partial", C::compute, B::none, S::weights, false};
    case Op::issue_clip: return {"issue_clip", C::issue, B::clip, S::weights, false};
    case Op::wait_clip: return {"wait_clip", C::wait, B::clip, S::weights, false};
    case Op::clip_scale: return {"clip_scale", C::compute, B::none, S::weights, false};
    case Op::tp_stage: return {"tp_stage", C::compute, B::none, S::weights, false};
    case Op::tp_gather: return {"tp_gather", C::issue, B::tp, S::weights, true};
    case Op::tp_assemble: return {"tp_assemble", C::compute, B::none, S::weights, false};
    case Op::tp_split: return {"tp_split", C::compute, B::none, S::weights, false};
    case Op::tp_scatter: return {"tp_scatter", C::issue, B::tp, S::weights, true};
    case Op::act_forward: return {"act_forward", C::compute, B::none, S::weights, false};
    case Op::act_recompute: return {"act_recompute", C::compute, B::none, S::weights, false};
    case Op::act_backward: return {"act_backward", C::compute, B::none, S::weights, false};
    case Op::pp_recv_activations: return {"pp_recv_activations", C::p2p, B::none, S::weights, true};
    case Op::pp_send_activations:
      return {"pp_send_activations", C::p2p, B::none, S::weights, false};
    case Op::pp_recv_gradients: return {"pp_recv_gradients", C::p2p, B::none, S::weights, true};
    case Op::pp_send_gradients: return {"pp_send_gradients", C::p2p, B::none, S::weights, false};
  }
  return {"?", C::bookkeeping, B::none, S::weights, false};
}
inline const char* op_name(Op op) {
  return op_traits(op).name;
}
inline constexpr bool is_compute(Op op) {
  return op_traits(op).cls == OpClass::compute;
}
inline constexpr bool is_issue(Op op) {
  return op_traits(op).cls == OpClass::issue;
}
inline constexpr bool is_wait(Op op) {
  return op_traits(op).cls == OpClass::wait;
}

enum class HookPoint { forward_pre, forward_post, backward_pre, backward_post };

struct StepOp {
  Op op = Op::hook;
  int group = -1;
  int param = -1;
  /// Issue ops: the communicator their collectives run on (set once, by make_schedule).
  CommGroup comm = CommGroup::shard;
  /// Pool offsets of the group's slots where the op touches them (-1: not used).
  std::int64_t weight_base = -1;
  std::int64_t grad_base = -1;
  std::int64_t gather_base = -1;
  Phase phase = Phase::step;
  bool timed = true;     ///< false for hooks and releases (bookkeeping)
  bool exposed = false;  ///< its time counts as exposed communication
  HookPoint hook = HookPoint::forward_pre;
  /// Op::hook: this hook issues or waits for a collective (forward-pre, Z3 backward-pre,
  /// backward-post); forward-post and the Z2 backward-pre fire without communicating.
  bool communicates = false;
  /// --accum: the micro-step (0-based) a forward/backward belongs to; backward accumulates
  /// into the gradient (instead of overwriting it) from micro-step 1 on.
  int micro = 0;
  bool accumulate = false;
};

/// Where the phase timer switches: a timed op whose (phase, exposed) differs from the
/// segment in progress starts a new segment. The one rule every interpreter follows.
class PhaseSegmenter {
 public:
  /// True when `op` starts a new segment (then phase() and exposed() describe it).
  bool enter(const StepOp& op) {
    if (!op.timed || (open_ && op.phase == phase_ && op.exposed == exposed_)) return false;
    open_ = true;
    phase_ = op.phase;
    exposed_ = op.exposed;
    return true;
  }
  Phase phase() const { return phase_; }
  bool exposed() const { return exposed_; }

 private:
  bool open_ = false;
  Phase phase_ = Phase::step;
  bool exposed_ = false;
};

}  // namespace dmuon::engine
