#pragma once
// What one rank holds during a training step, decided once per (plan, method, options, rank)
// without MPI or CUDA: which parameters it owns, keeps a master copy of, shards or only
// receives; the packed (site, owner) buffers of DMuon; and where every group's weights,
// gradients and optimizer gathers live inside the backends' buffer pools. Pure data, so the
// schedule, its tests and a simulator can build it for any rank of any world.
//
// Buffers (elements; "wire" = StepSpec::wire, --comm-dtype, the weights' type; "reduce" =
// StepSpec::reduce_dtype(), --reduce-dtype, the gradients' type; each fp32 or bf16):
//   master arena    fp32, persistent: DMuon masters of the (site, owner) pairs rooted in this
//                   rank's column (the owner and, with HSDP, every rank of its column), packed
//                   per pair; FSDP shards (chunk each); DDP full replicas.
//   state arenas    fp32, persistent: Muon momentum or AdamW's exp_avg of what this rank
//                   updates (first arena); AdamW's exp_avg_sq (second arena).
//   grad arena      reduce, persistent: gradients that must outlive the backward pass (pairs
//                   rooted here: stage-1 root, stage-2 input, the owner's reduced gradient;
//                   FSDP gradient shards; DDP full gradients).
//   weight pool     wire: the groups' packed broadcasts / all-gathered weights that compute
//                   reads. Z3: a ring of prefetch + 1 slots (a group is live from its issue to
//                   the end of its compute), and after it the root unit's own slot when it
//                   stays gathered (StepLayout::stays_gathered); Z2: one slot per group (kept
//                   until backward).
//   grad pool       reduce: gradients that only travel (pairs rooted elsewhere, FSDP padded full
//                   gradients): a ring of grad_window slots (prefetch + 2; the reference's
//                   DMuon schedule: 2), a slot reused once the reduce that read it completed
//                   (the schedule waits for it first).
//   gather pool     wire: fsdp-muon's all-gathered Nesterov inputs, 2 slots (per-group
//                   optimizer pipeline) or one per group.
//   alt arenas      a parameter whose --route dtype (plan.route_wire_bytes, both directions)
//                   differs from the run's wire type keeps its weights in a persistent alt
//                   weights arena of the other type (its gathered / packed / replica compute
//                   copy); one whose --route dtype differs from the run's reduce type keeps its
//                   gradients in a persistent alt grads arena of the type other than reduce
//                   (its full gradient, then its shard; or its pair's packed gradient). With
//                   wire == reduce both hold the same parameters. Owner-based ones pack into
//                   (site, owner) pairs of their own types. Not pooled: each has its own
//                   region, so no pool slot mixes widths. fsdp-muon's Nesterov gather of a
//                   parameter with alt weights: a third (alt gather) arena of the alt weights'
//                   type, also one region each.
//   ns input        fp32, persistent: the Nesterov input of each Muon parameter updated here
//                   (at its state offset), which Newton–Schulz overwrites with its output.
//   TP exchange     --tp, on a DP owner of TP-sharded parameters (one exchange at a time, so
//                   sized by the largest local shard c it exchanges): tp_send (wire, c: its
//                   shard on the gather's wire) and, on a TP owner, tp_recv (wire, T·c: the
//                   gathered shards) and tp_matrix (fp32, 2·T·c: the logical matrix, then the
//                   shards the scatter sends).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dmuon/base/rank_grid.hpp"
#include "dmuon/engine/step/engine_options.hpp"
#include "dmuon/engine/step/synthetic.hpp"
#include "dmuon/model/module_tree.hpp"
#include "dmuon/plan/plan.hpp"

namespace dmuon::engine {

/// Where a parameter lives on this rank.
enum class Storage {
  owned,       ///< dmuon: this rank owns it (fp32 master + momentum; runs Muon on it)
  column,      ///< dmuon HSDP: a rank of another row in this column owns it; fp32 master copy
  remote,      ///< dmuon: only the packed copy received for compute
  sharded,     ///< FSDP: 1/G of it (padded) in this row, replicated across rows
  replicated,  ///< DDP: everything everywhere
  expert,      ///< --ep: one of this rank's own routed experts, whole (no other rank has it)
};
const char* storage_name(Storage s);

/// expert: --ep, the routed experts of one container this rank holds (Storage::expert): no
/// collective, the compute copy made once per step as DDP's, updated here.
enum class GroupKind { fsdp, dmuon_site, ddp, expert };
/// Computes on a copy of this rank's own master (DDP replicas, EP experts): nothing gathered
/// or released.
inline bool computes_on_master(GroupKind k) {
  return k == GroupKind::ddp || k == GroupKind::expert;
}

struct ParamLayout {
  int pid = -1;
  std::string name;
  MatrixShape shape;
  std::int64_t numel = 0;
  int group = -1;
  Storage storage = Storage::replicated;
  bool muon = false;             ///< updated with Muon (else AdamW)
  bool updated_here = false;     ///< this rank runs its optimizer step (owned, sharded, replicated)
  int owner = -1;                ///< dmuon dedicated (or an owned expert): world rank of the owner
  int pair = -1;                 ///< dmuon dedicated: index into StepLayout::pairs
  std::int64_t pair_offset = 0;  ///< dmuon dedicated: offset inside the pair's packed buffer
  /// sharded: elements per rank of its group (the row; --ep E < G, an expert's: the expert
  /// group), padded; this rank's first element (its member index · chunk); chunk · the group's
  /// size, the gathered / full-gradient length.
  std::int64_t chunk = 0;
  std::int64_t shard_begin = 0;
  std::int64_t padded = 0;
  std::int64_t master_offset = -1;        ///< in the master arena (fp32); -1: none on this rank
  std::int64_t state_offset = -1;         ///< in the state arena; -1: this rank keeps no state
  std::int64_t second_state_offset = -1;  ///< AdamW's exp_avg_sq in the second state arena
  std::int64_t state_elems = 0;           ///< numel (owned, replicated) or chunk (sharded)
  /// Compute weights: offset inside its group's weight slot.
  std::int64_t weight_offset = 0;
  /// Where backward writes its gradient: in the grad arena (grad_persistent) or in its group's
  /// grad-pool slot. Sharded: the padded G·chunk full gradient (pool); its shard is separate.
  bool grad_persistent = false;
  std::int64_t grad_offset = 0;
  std::int64_t grad_shard_offset = -1;  ///< sharded: chunk elements in the grad arena
  std::int64_t gather_offset = -1;      ///< fsdp-muon Muon params: in the group's gather slot (alt)
  /// The type its weights travel in (the run's wire type or its --route dtype) and its
  /// gradients (the run's reduce type or its --route dtype). alt_wire: `wire` differs from the
  /// run's, so weight_offset (and gather_offset) are in the alt weight (gather) arena;
  /// alt_grad: `grad_wire` differs from the run's reduce type, so grad_offset and
  /// grad_shard_offset are in the alt grad arena and grad_persistent is true.
  kernels::Dtype wire = kernels::Dtype::f32;
  kernels::Dtype grad_wire = kernels::Dtype::f32;
  bool alt_wire = false;
  bool alt_grad = false;
  /// Tensor parallelism (StepLayout::tp > 1): the dimension of the logical parameter split
  /// over the TP group (0: rows, column-parallel; 1: columns, row-parallel), -1 if it is not
  /// TP-sharded; the TP rank that gathers its shards and runs its Newton–Schulz; and the
  /// logical matrix (shape with the split dimension × T; shape itself when not TP-sharded).
  int tp_dim = -1;
  int tp_owner = -1;
  MatrixShape logical;
  /// Its synthetic data (synthetic.hpp): the key (a TP shard's own, an EP expert's global
  /// one, else the parameter id) and this rank's share of the global samples, rank data_rank
  /// of data_ranks (the DP rank; an EP rank's expert sees every sample routed to it: 0 of 1).
  std::uint64_t data_key = 0;
  int data_rank = 0;
  int data_ranks = 1;
  bool tp_sharded() const { return tp_dim >= 0; }

  bool sharded() const { return storage == Storage::sharded; }
  /// Elements of its full buffers (gathered weights, full gradient): padded when sharded.
  std::int64_t full_elems() const { return sharded() ? padded : numel; }
  /// Elements this rank's optimizer reads and writes: its shard (padded) or the parameter.
  std::int64_t own_elems() const { return sharded() ? chunk : numel; }
  /// Real elements of this rank's shard (the last shard is short, a shard past the end
  /// empty); the whole parameter when not sharded.
  std::int64_t shard_len() const;
  /// Real elements of the shard of member `member` of its group (sharded parameters).
  std::int64_t shard_len_at(int member) const;
  /// Zeros after the parameter in its padded full buffers.
  std::int64_t padding() const { return sharded() ? padded - numel : 0; }
};

/// One (site, owner) pair of a DMuon site: the owner's parameters, packed in model order.
struct PairLayout {
  int group = -1;
  int owner = -1;  ///< world rank
  /// Root of the broadcast and stage-1 reduce: the owner's index in the group's communicator
  /// (its column; an expert group's: the owner's member index there).
  int owner_column = 0;
  int owner_row = 0;         ///< root of the stage-2 reduce and the replicate broadcast
  std::vector<int> members;  ///< indices into StepLayout::params
  std::int64_t numel = 0;
  bool rooted_here = false;        ///< in this rank's column: holds a master copy (HSDP) or owns it
  bool owned = false;              ///< this rank is the owner
  std::int64_t weight_offset = 0;  ///< inside the group's weight slot
  std::int64_t master_offset = -1;  ///< rooted_here: in the master arena
  std::int64_t state_offset = -1;   ///< owned: momentum in the state arena
  bool grad_persistent = false;     ///< == rooted_here (alt_grad: true)
  std::int64_t grad_offset = 0;     ///< in the grad arena or the group's grad slot
  /// The types its packed weights and gradients travel in; alt_wire (alt_grad): a --route
  /// dtype other than the run's wire (reduce) type, so weight_offset (grad_offset) is in the
  /// alt weight (grad) arena, its own region.
  kernels::Dtype wire = kernels::Dtype::f32;
  kernels::Dtype grad_wire = kernels::Dtype::f32;
  bool alt_wire = false;
  bool alt_grad = false;
};

struct GroupLayout {
  GroupKind kind = GroupKind::fsdp;
  std::vector<int> members;  ///< indices into StepLayout::params, model order
  std::vector<int> pairs;    ///< dmuon sites: indices into StepLayout::pairs
  /// The communicator its weights, gradients and gathers travel on: the row, or (--ep E < G)
  /// for the routed experts of one container the expert group of G/E ranks that hold them.
  CommGroup comm = CommGroup::shard;
  /// Pre/post-forward hooks fire here: DMuon sites; FSDP units of the fsdp methods (dmuon's
  /// non-dedicated unit is not a DMuon hook site). DDP has post-backward hooks only.
  bool hooked = false;
  /// dmuon, --route sharded_adamw: one group per boundary-rule site of those parameters (kind
  /// fsdp, unhooked), all-gathered where it runs; its reduce-scatter (and HSDP stage 2) runs
  /// after the last backward op, so its full gradients stay in the grad arena until then.
  bool deferred_reduce = false;
  /// The FSDP unit of the parameters no site holds (the first group, kind fsdp): what FSDP2's
  /// root unit holds (embeddings, final norm, output; here also any per-block norm left
  /// undedicated, which FSDP2 would put in its block's unit). StepLayout::stays_gathered.
  bool root_unit = false;
  std::int64_t weight_elems = 0;      ///< elements of its weights while live (packed / gathered)
  std::int64_t alt_weight_elems = 0;  ///< of which in the alt weight arena (alt_wire members)
  std::int64_t alt_gather_elems = 0;  ///< fsdp-muon gathers in the alt gather arena
  std::int64_t grad_elems = 0;        ///< elements it needs in a grad-pool slot
  std::int64_t gather_elems = 0;      ///< fsdp-muon: its all-gathered Nesterov inputs
  /// Z2 (and a Z3 group that stays gathered): offset of its own slot in the weight pool
  std::int64_t own_weight_slot = 0;
  std::int64_t own_gather_slot = 0;  ///< all_then_publish: offset of its own gather slot
  bool gathers() const { return gather_elems + alt_gather_elems > 0; }
  bool has_weight_comm() const {
    return !computes_on_master(kind) && weight_elems + alt_weight_elems > 0;
  }
};

struct StepLayout {
  Method method = Method::dmuon;
  plan::Reshard reshard = plan::Reshard::z3;
  /// This rank in the grid the method communicates over (ddp: one row of every rank).
  GridRank me;
  std::vector<ParamLayout> params;  ///< tree.parameter_order()
  std::vector<PairLayout> pairs;
  /// Forward order: the non-dedicated unit first, then the sites in module pre-order (a
  /// sharded_adamw site after the owner-based site of the same module).
  std::vector<GroupLayout> groups;
  std::int64_t master_elems = 0;
  std::int64_t state_elems = 0;
  std::int64_t second_state_elems = 0;
  std::int64_t grad_arena_elems = 0;
  /// Slots of the weight ring (Z3); Z2: every group has its own (Z3: so has one that stays
  /// gathered, after the ring).
  int weight_window = 1;
  std::int64_t weight_slot_elems = 0;  ///< one ring slot (the largest group in the ring)
  std::int64_t weight_pool_elems = 0;
  int grad_window = 2;
  /// StepSpec::fsdp2 without --accum: FSDP groups keep one reduce input in flight and hold
  /// their gradients in the weights' type until the copy-in (the schedule and the memory
  /// model read it).
  bool fsdp2 = false;
  /// Whether G's reduce follows that rule: an FSDP group that reduces after its backward.
  bool fsdp2_reduces(const GroupLayout& G) const {
    return fsdp2 && G.kind == GroupKind::fsdp && !G.deferred_reduce;
  }
  /// StepSpec::fsdp2 under Z3: the root unit is all-gathered once per micro-step and stays
  /// gathered from its forward to its backward, as FSDP2 keeps its root's parameters
  /// unsharded after forward (torch/distributed/fsdp/_fully_shard/_fsdp_state.py,
  /// FSDPState._lazy_init: the root's post_forward_mesh_info = None, "the parameters would
  /// be freed and all-gathered immediately" for backward). Every method's FSDP root unit.
  bool fsdp2_root = false;
  /// Whether G follows that rule: no release after its forward, no re-gather before its
  /// backward, released after its backward; its own weight slot for the whole step.
  bool stays_gathered(const GroupLayout& G) const { return fsdp2_root && G.root_unit; }
  /// Z3: G's weights have a slot of their own after the ring for the whole step (one that
  /// stays gathered; --ep, a rank's experts' compute copy).
  bool keeps_own_slot(const GroupLayout& G) const {
    return stays_gathered(G) || G.kind == GroupKind::expert;
  }
  /// The reference's DMuon step (StepSpec::reference_dmuon): the memory model holds the
  /// optimizer as the reference does (momentum in `momentum`, a transient Nesterov input,
  /// reduced-gradient clones, Newton–Schulz in a CUDA-graph pool; memory_model.hpp);
  /// `coalesced_clip`: --clip-norm, whose coalesced wait keeps every clone live at once.
  bool reference_memory = false;
  kernels::Dtype momentum = kernels::Dtype::f32;
  /// --param-dtype (the projection's memory and optimizer traffic): masters, optimizer state,
  /// autograd's gradients.
  kernels::Dtype param = kernels::Dtype::f32;
  bool coalesced_clip = false;
  std::int64_t grad_slot_elems = 0;
  std::int64_t grad_pool_elems = 0;
  int gather_window = 2;  ///< 0: one slot per group (all_then_publish)
  std::int64_t gather_slot_elems = 0;
  std::int64_t gather_pool_elems = 0;
  /// Peak elements of weight buffers a real implementation holds live (Z3: the groups in
  /// flight together; Z2: all), which is what the results report, not the pool's slot sizes.
  std::int64_t live_weight_elems = 0;
  /// The same peak in bytes, each group's weights in the type they travel in.
  std::int64_t live_weight_bytes = 0;
  /// The run's wire (weights) and reduce (gradients) types, and the other ones the alt arenas
  /// hold (alt weights and gathers: alt_wire; alt grads: alt_reduce; alt_*_elems > 0 only when
  /// a --route dtype differs from the run's).
  kernels::Dtype wire = kernels::Dtype::f32;
  kernels::Dtype alt_wire = kernels::Dtype::bf16;
  kernels::Dtype reduce = kernels::Dtype::f32;
  kernels::Dtype alt_reduce = kernels::Dtype::bf16;
  std::int64_t alt_weight_elems = 0;
  std::int64_t alt_grad_elems = 0;
  std::int64_t alt_gather_elems = 0;
  int nan_param = -1;  ///< --inject-nan-step target: the first dedicated parameter
  /// --tp: the largest local shard this rank exchanges (0: none), and whether it is the TP
  /// owner of one (then it holds tp_recv and tp_matrix).
  std::int64_t tp_chunk_elems = 0;
  bool tp_root = false;
  /// The step's activation work (StepSpec::activation; null: none) and, per unit, the group
  /// it runs at (activation_work.hpp: its anchor).
  std::shared_ptr<const ActivationWork> activation;
  std::vector<int> activation_group;

  /// Tensor parallelism: T and this rank's index in its TP group (the tree the layout was made
  /// from holds the local shard shapes: plan::tp_local_tree).
  int tp() const { return me.grid.tp; }
  /// --ep E < G: `p` is a routed expert's, shared by this rank's expert group, not the row.
  bool in_expert_group(const ParamLayout& p) const {
    return p.group >= 0 && groups.at(static_cast<std::size_t>(p.group)).comm == CommGroup::expert;
  }
  /// This rank's index among the ranks sharding `p`: its column, or its expert group's member.
  int shard_member(const ParamLayout& p) const {
    return in_expert_group(p) ? me.expert_replica() : me.column();
  }
  int tp_rank() const { return me.tp_index(); }
  /// G, R and the ranks of one DP group.
  int shards() const { return me.grid.shard; }
  int replicas() const { return me.grid.replicate; }
  bool hsdp() const { return me.grid.replicate > 1; }
  std::int64_t tp_send_elems() const { return tp_chunk_elems; }
  std::int64_t tp_recv_elems() const { return tp_root ? tp() * tp_chunk_elems : 0; }
  std::int64_t tp_matrix_elems() const { return tp_root ? 2 * tp() * tp_chunk_elems : 0; }
  /// Pool offsets of the slot a group uses when it is the `position`-th to take one in the
  /// current pass (weights: forward or backward; grads: backward; gathers: the optimizer).
  std::int64_t weight_base(int group, int position) const;
  std::int64_t grad_base(int position) const;
  std::int64_t gather_base(int group, int position) const;
};

/// The grid `method` communicates over in the plan's world (plan::Plan::grid): ddp ignores
/// the rows and runs over all ranks as one group.
RankGrid method_grid(const plan::Plan& plan, Method method);

/// The layout of world rank `rank` of the plan's grid (R rows × G columns × T). With tensor
/// parallelism (plan.tp.tp > 1) `tree` must hold the local shard shapes
/// (plan::tp_local_tree; InputError otherwise).
StepLayout make_layout(const model::ModuleTree& tree, const plan::Plan& plan, const StepSpec& spec,
                       int rank);

}  // namespace dmuon::engine
