#pragma once
// The order of one training step on one rank, as data: a pure function of the rank's layout
// and the engine options builds the list of operations every executor runs (the host one over
// MPI + Kokkos, the CUDA one over NCCL + cuBLAS streams, a simulator). Nothing in it depends on
// timing: collectives are issued on each communicator at fixed positions, identical on every
// rank of that communicator (no "issue when a local poll says ready"), which NCCL needs to
// avoid deadlock across communicators and which the tests check rank by rank.
//
// One step, groups g in forward order (the non-dedicated unit, then the hook sites):
//   forward   per g: [take_replica] pack, issue_weights for g..g+prefetch not yet issued;
//             wait_weights g; hook; forward p for its parameters; (Z3) release; hook
//   backward  per g in reverse: (Z3) the same weight prefetch and wait; hook; wait for the
//             reduce that last used this grad-pool slot; backward p in reverse; release;
//             issue_reduce g; hook; HSDP: issue_stage2 of the group issued stage2_lag earlier
//   Hooks: the four per hooked group fire in Z3 and Z2 alike (as the reference installs
//   them); forward-post and the Z2 backward-pre do not communicate.
//   optimizer per_group: per g in forward order wait its gradients, prepare (momentum),
//             [fsdp-muon: all-gather the Nesterov inputs, one group ahead], newton_schulz and
//             apply per parameter, publish (HSDP: the owners' replicate broadcasts);
//             all_then_publish: every wait and prepare, every NS, every apply, every publish.
//   --accum K: forward and backward run K times (micro-steps 0..K−1, weights collectives and
//             hooks every time); issue_reduce / stage 2 only in the last backward, whose
//             backward-post hooks alone communicate; every group has its own grad-pool slot.
//   --clip-norm: before the optimizer, every group's gradients waited, then clip_partial,
//             issue_clip (world all-reduce of one fp32), wait_clip, clip_scale.
//   --tp T:   a TP-sharded Muon parameter updated here (its DP owner: every rank of that
//             owner's TP group, which all share this schedule) replaces its newton_schulz by
//             tp_gather, newton_schulz (on its TP owner only, on the logical matrix),
//             tp_scatter, at the same place: the TP group's ranks issue the same gathers and
//             scatters in the same order (the parameters' order within their groups).

#include <cstdint>
#include <vector>

#include "dmuon/comm/collective_counters.hpp"
#include "dmuon/comm/dtype.hpp"
#include "dmuon/engine/run_result.hpp"
#include "dmuon/engine/step_layout.hpp"

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
  publish,        ///< HSDP dmuon: the owners' fp32 masters of g broadcast in their column
  hook,           ///< a communication hook fires (counted, not timed)
  // --clip-norm (grad_clip.hpp), once per step after every gradient reduce was waited:
  clip_partial,  ///< this rank's part of ‖g‖ (sum of squares or max) of what it counts
  issue_clip,    ///< all-reduce (sum or max) of that one fp32 scalar over the world
  wait_clip,
  clip_scale,  ///< every gradient the optimizer consumes here × min(1, X / (‖g‖ + 1e-6))
  // --tp (tp_exchange.hpp), one parameter each, blocking collectives on the TP group:
  tp_gather,   ///< the shards of its Newton–Schulz input to its TP owner (the wire dtype)
  tp_scatter,  ///< the TP owner's Newton–Schulz output back to the shard holders (fp32)
};
const char* op_name(Op op);

enum class HookPoint { forward_pre, forward_post, backward_pre, backward_post };

struct StepOp {
  Op op = Op::hook;
  int group = -1;
  int param = -1;
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

struct ScheduleOptions {
  int prefetch = 1;
  plan::GradReduce grad_reduce = plan::GradReduce::per_param;
  OptimizerPipeline pipeline = OptimizerPipeline::per_group;
  int stage2_lag = 1;  ///< HSDP: stage 2 of a group is issued this many groups after stage 1
  comm::DType wire = comm::DType::f32;  ///< parameters and gradients on the wire
  int accum = 1;                        ///< micro-steps per step (gradient accumulation)
  bool clip = false;                    ///< --clip-norm: the norm ops before the optimizer
  ClipNormType clip_type = ClipNormType::two;
};

/// The schedule options of a run.
ScheduleOptions schedule_options(const EngineOptions& o);

using Schedule = std::vector<StepOp>;

/// The operations of one step of the rank `layout` describes.
Schedule make_schedule(const StepLayout& layout, const ScheduleOptions& options);

/// A buffer a collective reads or writes, resolved to memory by the backend.
struct BufferRef {
  enum class Kind {
    weights,     ///< pair: its packed slice of the weight slot; param: its region there
    grads,       ///< pair or param: where its gradient is (grad arena or grad slot)
    grad_shard,  ///< param (sharded): its gradient shard in the grad arena
    master,      ///< pair (rooted here): its fp32 packed master
    gather,      ///< param (fsdp-muon): its all-gathered Nesterov input in the gather slot
    clip_norm,   ///< --clip-norm: the one fp32 scalar of the norm all-reduce
  };
  Kind kind = Kind::weights;
  int pair = -1;
  int param = -1;
  std::int64_t base = 0;  ///< the op's pool base for the pooled kinds
};

/// The arenas of the step layout (step_layout.hpp) a buffer lives in.
enum class Arena {
  master,
  grad_arena,
  weight_pool,
  grad_pool,
  gather_pool,
  clip_scalar,
  alt_weights,  ///< --route dtype parameters' weights, in StepLayout::alt_wire
  alt_grads,    ///< --route dtype parameters' gradients and shards, in StepLayout::alt_wire
  alt_gather,   ///< --route dtype parameters' fsdp-muon Nesterov gathers, in the alt type
};

/// Where a buffer is: an arena and an element offset in it (the arena's element type: fp32
/// for master, the alt type for the alt arenas, the wire type otherwise). The one place that
/// decides it, for every backend; throws std::logic_error for a reference the layout does not have.
struct Location {
  Arena arena = Arena::master;
  std::int64_t offset = 0;
};
Location locate(const StepLayout& layout, const BufferRef& ref);
/// The gradient backward writes for a parameter: its persistent place or its group's slot.
Location gradient_location(const StepLayout& layout, int param, std::int64_t grad_base);

/// One copy a pack op makes: `count` fp32 master elements from the master arena at `master`
/// into `to` (the weight pool) at `weight`, converted to its `dtype`. DMuon: one per packed pair
/// rooted here (one kernel per packed buffer); FSDP: each shard to its own place in the gathered
/// buffer (the all-gather then runs in place); DDP: each replica's compute copy.
struct PackCopy {
  std::int64_t master = 0;
  std::int64_t weight = 0;  ///< offset in `to`
  std::int64_t count = 0;
  Arena to = Arena::weight_pool;               ///< alt_weights for a --route dtype parameter
  kernels::Dtype dtype = kernels::Dtype::f32;  ///< the type of `to`
};
std::vector<PackCopy> pack_copies(const StepLayout& layout, const StepOp& op);

/// One collective as an executor issues it on `comm`:
///   broadcast(buffer, count, dtype, root); reduce_avg(buffer -> buffer on root, in place);
///   all_gather in place (buffer holds size·count; this rank's part at rank·count);
///   reduce_scatter_avg(buffer of size·count -> recv); all_reduce_avg in place (all_reduce_sum
///   or all_reduce_max where `op` says so: the clip norm).
struct CollectiveCall {
  comm::CollectiveKind kind = comm::CollectiveKind::broadcast;
  CommGroup comm = CommGroup::shard;
  std::int64_t count = 0;
  comm::DType dtype = comm::DType::f32;
  int root = -1;
  BufferRef buffer;
  BufferRef recv;  ///< reduce_scatter only
  enum class Reduce { avg, sum, max };
  Reduce op = Reduce::avg;  ///< all_reduce only
};

/// The collectives of an issue op (issue_weights, issue_reduce, issue_stage2, issue_gather,
/// publish, issue_clip), in the order they are issued inside its batch; empty for other ops.
std::vector<CollectiveCall> collectives_of(const StepLayout& layout, const StepOp& op,
                                           const ScheduleOptions& options);

/// One TP exchange op as the TP group runs it: a gather (tp_gather) or scatter (tp_scatter) of
/// `count` elements of `dtype` per TP rank (the parameter's local shard), rooted at TP rank
/// `root`. The gather carries the gradients' wire dtype, the scatter the fp32 update.
struct TpCall {
  std::int64_t count = 0;
  int root = -1;
  comm::DType dtype = comm::DType::f32;
};
/// The TP exchange of a tp_gather / tp_scatter op; throws std::logic_error for other ops.
TpCall tp_call_of(const StepLayout& layout, const StepOp& op, const ScheduleOptions& options = {});

/// The communicator an issue op uses (publish: the replicate group, HSDP dmuon; tp_gather and
/// tp_scatter: the TP group).
CommGroup comm_of(Op op);
/// The communicator an issue op of `layout` uses: comm_of(op), except ddp-dmuon's publish (its
/// post-step broadcast), which runs over its one group of all ranks (the shard group).
CommGroup comm_of(const StepLayout& layout, Op op);
/// ddp-dmuon: group g's owners broadcast their updated fp32 masters to every replica after the
/// optimizer step (Op::publish); the next step's forward completes it (Op::take_replica).
bool publishes_replicas(const StepLayout& layout, const GroupLayout& g);

}  // namespace dmuon::engine
