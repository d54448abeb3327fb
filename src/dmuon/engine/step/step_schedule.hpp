#pragma once
// The order of one training step on one rank, as data: a pure function of the rank's layout
// and the step spec builds the list of operations every executor runs (the host one over
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
//             (fsdp2: an FSDP group first waits for the previous FSDP group's reduce)
//   Hooks: the four per hooked group fire in Z3 and Z2 alike (as the reference installs
//   them); forward-post and the Z2 backward-pre do not communicate.
//   fsdp2 under Z3 (StepLayout::stays_gathered): the root unit (the FSDP unit of the
//             parameters no site holds) skips its forward release and its backward prefetch
//             and wait: gathered once per micro-step, released after its backward, as FSDP2
//             keeps its root unsharded after forward.
//   optimizer per_group: per g in forward order wait its gradients, prepare (momentum),
//             [fsdp-muon: all-gather the Nesterov inputs, one group ahead], newton_schulz and
//             apply per parameter, publish (HSDP: the owners' replicate broadcasts);
//             all_then_publish: every wait and prepare, every NS, every apply, every publish.
//   --accum K: forward and backward run K times (micro-steps 0..K−1, weights collectives and
//             hooks every time); issue_reduce / stage 2 only in the last backward, whose
//             backward-post hooks alone communicate; every group has its own grad-pool slot.
//   --pp P:   the micro-steps' forwards and backwards in 1F1B order (pipeline_order.hpp), a
//             forward after the receive of its activations from the previous stage and before
//             the send of its output to the next, a backward likewise with the gradients the
//             other way (pp_* ops on the pipeline group); Z2 releases the weights in a run's
//             last backward only (several micro-batches are in flight).
//   --clip-norm: before the optimizer, every group's gradients waited, then clip_partial,
//             issue_clip (world all-reduce of one fp32), wait_clip, clip_scale.
//   dmuon, --dmuon-schedule reference (the default; docs/REFERENCE-STEP.md in the shared docs):
//             backward: a site's post-backward hook waits for the previous site's stage-1
//             reduce before it issues its own (one site's reduce in flight; the grad ring has 2
//             slots); optimizer: every site's stage-1 reduce waited first (the whole reduce
//             tail: the reference queues the waits on its FIFO reduce stream, and the first site
//             was reduced last), then per site in forward order stage 2, prepare, NS, apply,
//             publish, then the other groups (AdamW over the FSDP shards) in forward order.
//             `overlapped`: the order above without those waits, groups in forward order.
//   --tp T:   a TP-sharded Muon parameter updated here (its DP owner: every rank of that
//             owner's TP group, which all share this schedule) replaces its newton_schulz by
//             tp_stage, tp_gather, [on its TP owner: tp_assemble, newton_schulz on the logical
//             matrix, tp_split], tp_scatter, at the same place: the TP group's ranks issue the
//             same gathers and scatters in the same order (the parameters' order within their
//             groups). The gather and the scatter are collectives of the TP group like any.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "dmuon/comm/collective_counters.hpp"
#include "dmuon/comm/dtype.hpp"
#include "dmuon/engine/step/run_result.hpp"
#include "dmuon/engine/step/step_layout.hpp"
#include "dmuon/engine/step/step_op.hpp"

namespace dmuon::engine {

using Schedule = std::vector<StepOp>;

/// The operations of one step of the rank `layout` describes (issue ops carry their
/// communicator).
Schedule make_schedule(const StepLayout& layout, const StepSpec& spec);
/// The same, built in `reuse`'s storage (cleared first): a caller building many schedules
/// (the projection: one per rank) allocates once.
Schedule make_schedule(const StepLayout& layout, const StepSpec& spec, Schedule reuse);

/// Receives a schedule's ops a block of consecutive ones at a time, in order.
using ScheduleSink = std::function<void(const StepOp* ops, std::size_t count)>;
/// make_schedule's ops handed to `sink` block by block instead of kept: a caller that reads
/// them once, in order (the projection compiles one per rank: ~100,000 ops, 7 MB, at 15,000
/// hook sites), works on ops still in cache instead of writing and rereading the whole list.
void stream_schedule(const StepLayout& layout, const StepSpec& spec, const ScheduleSink& sink);

/// How the steps of a schedule run beyond its op list, decided with it so the engine's step loop
/// and the projection's replay follow the same model.
struct StepRunModel {
  /// Every step starts from a world barrier (the wait timed as step_sync). Without it (the
  /// reference's benchmark: torch.cuda.synchronize per rank, no barrier) a rank starts its next
  /// step when its own has ended, and the next forward's broadcast from an owner waits for that
  /// owner's whole optimizer step: the imbalance lands in the forward, inside the step.
  bool barrier = true;
  /// The batches of one communicator run in their issue order whatever stream they are on: NCCL
  /// serialises a communicator's collectives (it orders them with CUDA events; NVIDIA/nccl
  /// #574), so a reduce cannot overtake a queued prefetch broadcast.
  bool comm_issue_order = false;
  /// Inside one batch (one NCCL group: one kernel launch), the rooted calls (broadcasts,
  /// reduces, each from or to its own root) run one after another on the channels, each
  /// filling its ring pipeline anew: one launch latency, every call's hop latency.
  bool serial_rooted_calls = false;
};
/// The model of the run `spec` describes: the reference's for dmuon under
/// DmuonSchedule::reference, the barrier-synchronised, concurrent one otherwise.
StepRunModel step_run_model(const StepSpec& spec);

/// A buffer a collective reads or writes, resolved to memory by the backend.
struct BufferRef {
  enum class Kind {
    weights,     ///< pair: its packed slice of the weight slot; param: its region there
    grads,       ///< pair or param: where its gradient is (grad arena or grad slot)
    grad_shard,  ///< param (sharded): its gradient shard in the grad arena
    master,      ///< pair (rooted here): its fp32 packed master
    gather,      ///< param (fsdp-muon): its all-gathered Nesterov input in the gather slot
    clip_norm,   ///< --clip-norm: the one fp32 scalar of the norm all-reduce
    ns_input,    ///< param (Muon, updated here): its fp32 Nesterov input / Newton–Schulz output
    tp_send,     ///< --tp: this rank's shard on the gather's wire
    tp_recv,     ///< --tp, TP owner: the T gathered shards, one after the other
    tp_matrix,   ///< --tp, TP owner: the fp32 logical matrix Newton–Schulz works on
    tp_shards,   ///< --tp, TP owner: the fp32 output cut into the T shards the scatter sends
  };
  Kind kind = Kind::weights;
  int pair = -1;
  int param = -1;
  std::int64_t base = 0;  ///< the op's pool base for the pooled kinds
};

/// The arenas of the step layout (step_layout.hpp) a buffer lives in.
enum class Arena {
  master,
  grad_arena,  ///< StepLayout::reduce (gradients)
  weight_pool,
  grad_pool,  ///< StepLayout::reduce (gradients)
  gather_pool,
  clip_scalar,
  alt_weights,  ///< --route dtype parameters' weights, in StepLayout::alt_wire
  alt_grads,    ///< --route dtype parameters' gradients and shards, in StepLayout::alt_reduce
  alt_gather,   ///< --route dtype parameters' fsdp-muon Nesterov gathers, in the alt type
  ns_input,     ///< fp32: Muon Nesterov inputs (state offsets), Newton–Schulz in place
  tp_send,      ///< the wire type: StepLayout::tp_send_elems
  tp_recv,      ///< the wire type: StepLayout::tp_recv_elems
  tp_matrix,    ///< fp32: the logical matrix, then the shards (StepLayout::tp_matrix_elems)
};

/// Where a buffer is: an arena and an element offset in it (the arena's element type: fp32
/// for master, ns_input and tp_matrix, the alt types for the alt arenas, the reduce type for
/// the grad arena and pool, the wire type otherwise). The one place that
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

/// One collective as an executor issues it on its op's communicator (StepOp::comm):
///   broadcast(buffer, count, dtype, root); reduce_avg(buffer -> buffer on root, in place);
///   all_gather in place (buffer holds size·count; this rank's part at rank·count);
///   reduce_scatter_avg(buffer of size·count -> recv); all_reduce_avg in place (all_reduce_sum
///   or all_reduce_max where `op` says so: the clip norm); gather(buffer -> recv on root, size·
///   count there); scatter(buffer of size·count on root -> recv).
struct CollectiveCall {
  comm::CollectiveKind kind = comm::CollectiveKind::broadcast;
  std::int64_t count = 0;
  comm::DType dtype = comm::DType::f32;
  int root = -1;
  BufferRef buffer;
  BufferRef recv;  ///< reduce_scatter, gather (root), scatter
  enum class Reduce { avg, sum, max };
  Reduce op = Reduce::avg;  ///< all_reduce only
};

/// The collectives of an issue op (issue_weights, issue_reduce, issue_stage2, issue_gather,
/// publish, issue_clip, tp_gather, tp_scatter), in the order they are issued inside its batch;
/// empty for other ops.
std::vector<CollectiveCall> collectives_of(const StepLayout& layout, const StepOp& op,
                                           const StepSpec& spec);

/// ddp-dmuon: group g's owners broadcast their updated fp32 masters to every replica after the
/// optimizer step (Op::publish); the next step's forward completes it (Op::take_replica).
bool publishes_replicas(const StepLayout& layout, const GroupLayout& g);

}  // namespace dmuon::engine
