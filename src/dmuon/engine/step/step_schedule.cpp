#include "dmuon/engine/step/step_schedule.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>

namespace dmuon::engine {

namespace {

comm::DType on_wire(kernels::Dtype t) {
  return t == kernels::Dtype::bf16 ? comm::DType::bf16 : comm::DType::f32;
}

// The types parameter p's (pair pr's) own collectives carry: its --route dtype (alt arenas) or
// the run's; weights in the wire type, gradients in the reduce type.
comm::DType param_wire(const ParamLayout& p) {
  return on_wire(p.wire);
}
comm::DType pair_wire(const PairLayout& pr) {
  return on_wire(pr.wire);
}
comm::DType param_grad_wire(const ParamLayout& p) {
  return on_wire(p.grad_wire);
}
comm::DType pair_grad_wire(const PairLayout& pr) {
  return on_wire(pr.grad_wire);
}

}  // namespace

bool publishes_replicas(const StepLayout& layout, const GroupLayout& g) {
  return layout.method == Method::ddp_dmuon && g.kind == GroupKind::ddp && !g.pairs.empty();
}

namespace {

bool has_rooted_pair(const StepLayout& L, const GroupLayout& g) {
  return std::any_of(g.pairs.begin(), g.pairs.end(),
                     [&](int pr) { return L.pairs[static_cast<std::size_t>(pr)].rooted_here; });
}

// Builds the op list; one instance per make_schedule call.
class Builder {
 public:
  // `sink`: hand the ops over in blocks of kBlock (stream_schedule) instead of keeping them.
  Builder(const StepLayout& layout, const StepSpec& options, Schedule reuse,
          const ScheduleSink* sink = nullptr)
      : sink_(sink),
        L_(layout),
        o_(options),
        n_(static_cast<int>(layout.groups.size())),
        z3_(layout.reshard == plan::Reshard::z3),
        weight_base_(static_cast<std::size_t>(n_), -1),
        grad_base_(static_cast<std::size_t>(n_), -1),
        reduce_waited_(static_cast<std::size_t>(n_), false),
        stage2_waited_(static_cast<std::size_t>(n_), false) {
    // About a dozen ops per group and micro-step and a few per parameter: one allocation
    // instead of a dozen doublings (the projection builds one schedule per rank).
    ops_ = std::move(reuse);
    ops_.clear();
    if (sink_ != nullptr) {
      ops_.reserve(kBlock);
      return;
    }
    const std::size_t params = layout.params.size(), groups = layout.groups.size();
    ops_.reserve(static_cast<std::size_t>(options.accum) * (12 * groups + 2 * params) + 8 * groups +
                 4 * params);
  }

  Schedule build() {
    if (o_.stages.active()) {
      pipelined();
    } else {
      for (micro_ = 0; micro_ < o_.accum; ++micro_) {
        forward();
        backward();
      }
    }
    micro_ = 0;
    if (o_.clip()) clip();
    if (o_.pipeline == OptimizerPipeline::per_group && o_.reference_dmuon())
      optimizer_reference();
    else if (o_.pipeline == OptimizerPipeline::per_group)
      optimizer_per_group();
    else
      optimizer_all_then_publish();
    if (sink_ != nullptr) flush();
    return std::move(ops_);
  }

 private:
  const GroupLayout& group(int g) const { return L_.groups[static_cast<std::size_t>(g)]; }
  const ParamLayout& param(int p) const { return L_.params[static_cast<std::size_t>(p)]; }

  // Ops are only amended right after they are emitted (emit(...).param = p), so a block is
  // complete once the next op comes.
  void flush() {
    (*sink_)(ops_.data(), ops_.size());
    ops_.clear();
  }

  // Built in place: copying an op assembled on the stack stalls on store forwarding (its
  // fields written narrow, read back wide), and the projection builds ~100,000 per rank.
  StepOp& emit(Op op, int g, Phase phase, bool exposed) {
    if (sink_ != nullptr && ops_.size() == kBlock) flush();
    StepOp& s = ops_.emplace_back();
    s.op = op;
    s.group = g;
    s.comm = comm_of(op, g);
    s.phase = phase;
    s.exposed = exposed;
    if (g >= 0) {
      s.weight_base = weight_base_[static_cast<std::size_t>(g)];
      s.grad_base = grad_base_[static_cast<std::size_t>(g)];
    }
    s.micro = micro_;
    return s;
  }
  void untimed(Op op, int g) { emit(op, g, Phase::step, false).timed = false; }
  void hook(int g, HookPoint h, bool communicates) {
    StepOp& s = emit(Op::hook, g, Phase::step, false);
    s.timed = false;
    s.hook = h;
    s.communicates = communicates;
  }
  void compute(Op op, int g, int p, Phase phase) {
    StepOp& s = emit(op, g, phase, false);
    s.param = p;
    s.accumulate = op == Op::backward && micro_ > 0;
  }
  bool last_micro() const { return micro_ == o_.accum - 1; }

  // The activation work anchored at group g (activation_work.hpp): in forward its units'
  // forward ops in unit order; in backward, unit by unit in reverse, its recompute then its
  // backward. One op per unit and phase with work.
  void activation_forward(int g) {
    if (!L_.activation) return;
    const auto& units = L_.activation->units;
    for (std::size_t u = 0; u < units.size(); ++u)
      if (L_.activation_group[u] == g && !units[u].forward.empty())
        emit(Op::act_forward, g, Phase::forward_compute, false).param = static_cast<int>(u);
  }
  void activation_backward(int g) {
    if (!L_.activation) return;
    const auto& units = L_.activation->units;
    for (std::size_t i = units.size(); i-- > 0;) {
      if (L_.activation_group[i] != g) continue;
      if (!units[i].recompute.empty())
        emit(Op::act_recompute, g, Phase::backward_compute, false).param = static_cast<int>(i);
      if (!units[i].backward.empty())
        emit(Op::act_backward, g, Phase::backward_compute, false).param = static_cast<int>(i);
    }
  }

  // The communicator of an issue op: the world for the clip norm, the TP group for the TP
  // exchange, the replicate group for HSDP stage 2 and the owners' column broadcasts
  // (ddp-dmuon's post-step broadcast: its one group of all ranks), the pipeline group for a
  // stage's sends and receives, else the group's own (the shard group; --ep E < G, an expert
  // group's).
  CommGroup comm_of(Op op, int g) const {
    switch (op) {
      case Op::issue_clip: return CommGroup::world;
      case Op::tp_gather:
      case Op::tp_scatter: return CommGroup::tp;
      case Op::issue_stage2: return CommGroup::replicate;
      case Op::pp_recv_activations:
      case Op::pp_send_activations:
      case Op::pp_recv_gradients:
      case Op::pp_send_gradients: return CommGroup::pipeline;
      case Op::publish:
        return publishes_replicas(L_, group(g)) ? group(g).comm : CommGroup::replicate;
      default: return g >= 0 ? group(g).comm : CommGroup::shard;  // clip ops have no group
    }
  }

  bool has_stage2(int g) const {
    if (!L_.hsdp()) return false;
    const auto& G = group(g);
    if (G.kind == GroupKind::dmuon_site) return has_rooted_pair(L_, G);
    return G.kind == GroupKind::fsdp;
  }

  // Issues the weight collectives of order[issued_ .. k + prefetch] and waits for order[k].
  // Backward skips a group that stays gathered from its forward (FSDP2's root unit).
  void weights_ready(const std::vector<int>& order, int k, bool backward_pass) {
    const Phase ph = backward_pass ? Phase::backward_comm : Phase::forward_comm;
    for (; issued_ < n_ && issued_ <= k + o_.prefetch; ++issued_) {
      const int g = order[static_cast<std::size_t>(issued_)];
      const auto& G = group(g);
      if (backward_pass && L_.stays_gathered(G)) continue;
      weight_base_[static_cast<std::size_t>(g)] = L_.weight_base(g, issued_);
      if (computes_on_master(G.kind)) {
        // Replicas (and EP experts): the compute copy is made once per step, no collective.
        // ddp-dmuon: first complete the previous step's post-step broadcast of the owners' updates.
        if (!backward_pass && publishes_replicas(L_, G)) emit(Op::take_replica, g, ph, true);
        if (!backward_pass) emit(Op::pack, g, Phase::forward_compute, false);
        continue;
      }
      if (!G.has_weight_comm()) continue;
      if (!backward_pass && micro_ == 0 && L_.hsdp() && G.kind == GroupKind::dmuon_site &&
          has_rooted_pair(L_, G))
        emit(Op::take_replica, g, ph, true);
      emit(Op::pack, g, ph, true);
      emit(Op::issue_weights, g, ph, true);
    }
    const int g = order[static_cast<std::size_t>(k)];
    if (group(g).has_weight_comm() && !(backward_pass && L_.stays_gathered(group(g))))
      emit(Op::wait_weights, g, ph, true);
  }

  // --pp: the micro-batches' passes in 1F1B order (pipeline_order.hpp), each between the
  // receive of what it needs from a neighbouring stage and the send of what it makes. Z2
  // keeps the weights a forward gathered until the run's last backward: with several
  // micro-batches in flight a backward may follow another backward.
  void pipelined() {
    const PipelineStages& p = o_.stages;
    const auto passes = one_f_one_b(p.count, p.stage, o_.accum, p.runs);
    const int per_run = o_.accum / p.runs;
    for (const PipelinePass& pass : passes) {
      micro_ = pass.micro;
      if (pass.forward) {
        if (p.has_previous()) transfer(Op::pp_recv_activations, Phase::forward_comm);
        forward();
        if (p.has_next()) transfer(Op::pp_send_activations, Phase::forward_comm);
        continue;
      }
      if (p.has_next()) transfer(Op::pp_recv_gradients, Phase::backward_comm);
      keep_gathered_ = !z3_ && (pass.micro + 1) % per_run != 0;
      backward();
      keep_gathered_ = false;
      if (p.has_previous()) transfer(Op::pp_send_gradients, Phase::backward_comm);
    }
  }
  // A stage boundary's receive (exposed: the stage waits) or send (its post).
  void transfer(Op op, Phase phase) { emit(op, -1, phase, true); }

  void forward() {
    std::vector<int> order(static_cast<std::size_t>(n_));
    for (int i = 0; i < n_; ++i) order[static_cast<std::size_t>(i)] = i;
    issued_ = 0;
    for (int k = 0; k < n_; ++k) {
      const int g = order[static_cast<std::size_t>(k)];
      const auto& G = group(g);
      weights_ready(order, k, false);
      if (G.hooked) hook(g, HookPoint::forward_pre, true);
      for (int p : G.members) compute(Op::forward, g, p, Phase::forward_compute);
      activation_forward(g);
      if (z3_ && !computes_on_master(G.kind) && !L_.stays_gathered(G))
        untimed(Op::release_weights, g);
      if (G.hooked) hook(g, HookPoint::forward_post, false);
    }
  }

  void backward() {
    std::vector<int> order(static_cast<std::size_t>(n_));
    for (int i = 0; i < n_; ++i) order[static_cast<std::size_t>(i)] = n_ - 1 - i;
    issued_ = 0;
    std::vector<int> grad_slot_occupant(static_cast<std::size_t>(L_.grad_window), -1);
    int fsdp2_previous = -1;  // the FSDP group whose reduce input is in flight (fsdp2)
    int site_previous = -1;   // the DMuon site whose reduce is in flight (reference_dmuon)
    for (int k = 0; k < n_; ++k) {
      const int g = order[static_cast<std::size_t>(k)];
      const auto& G = group(g);
      if (z3_ && !computes_on_master(G.kind)) weights_ready(order, k, true);
      if (G.hooked) hook(g, HookPoint::backward_pre, z3_ && !L_.stays_gathered(G));
      if (G.grad_elems > 0) {
        grad_base_[static_cast<std::size_t>(g)] = L_.grad_base(k);
        // The reduce that last read this grad-pool slot must be done before it is rewritten
        // (with --accum every group has its own slot: reduces run after the last micro-step).
        int& occupant = grad_slot_occupant[static_cast<std::size_t>(k % L_.grad_window)];
        if (occupant >= 0 && occupant != g) wait_reduce(occupant);
        occupant = g;
      }
      activation_backward(g);
      for (auto it = G.members.rbegin(); it != G.members.rend(); ++it)
        compute(Op::backward, g, *it, Phase::backward_compute);
      if (!computes_on_master(G.kind) && !keep_gathered_) untimed(Op::release_weights, g);
      // FSDP2 (StepSpec::fsdp2): before this group's gradients go into its reduce input, the
      // previous FSDP group's reduce is waited and its input freed: one input in flight.
      const bool fsdp2_reduce = L_.fsdp2_reduces(G);
      if (last_micro() && fsdp2_reduce && fsdp2_previous >= 0) wait_reduce(fsdp2_previous);
      // The reference's DMuon post-backward hook: the previous site's stage-1 reduce first.
      const bool site_chain = o_.reference_dmuon() && G.kind == GroupKind::dmuon_site;
      if (last_micro() && site_chain && site_previous >= 0) wait_reduce(site_previous);
      // Earlier micro-steps only accumulate (no_sync): the hook fires without communicating.
      if (last_micro() && !G.deferred_reduce && reduces(G))
        emit(Op::issue_reduce, g, Phase::backward_comm, true);
      if (fsdp2_reduce) fsdp2_previous = g;
      if (site_chain) site_previous = g;
      if (G.hooked || G.kind == GroupKind::ddp) hook(g, HookPoint::backward_post, last_micro());
      if (last_micro() && k >= o_.stage2_lag)
        stage2(order[static_cast<std::size_t>(k - o_.stage2_lag)]);
    }
    if (!last_micro()) return;
    for (int k = std::max(0, n_ - o_.stage2_lag); k < n_; ++k)
      stage2(order[static_cast<std::size_t>(k)]);
    // sharded_adamw: after the last backward op, one reduce-scatter(avg) per parameter of every
    // deferred group (backward order), then their HSDP all-reduces; the same positions on every
    // rank of each communicator.
    for (int k = 0; k < n_; ++k) {
      const int g = order[static_cast<std::size_t>(k)];
      if (group(g).deferred_reduce) emit(Op::issue_reduce, g, Phase::backward_comm, true);
    }
    for (int k = 0; k < n_; ++k) {
      const int g = order[static_cast<std::size_t>(k)];
      if (group(g).deferred_reduce && has_stage2(g))
        emit(Op::issue_stage2, g, Phase::backward_comm, true);
    }
  }

  void stage2(int g) {
    if (has_stage2(g) && !group(g).deferred_reduce)
      emit(Op::issue_stage2, g, Phase::backward_comm, true);
  }

  // An EP rank's experts at E = G: every token routed to them arrived by the dispatch, so
  // their gradients are whole where they are computed (E < G: a group of the expert group's
  // kinds, which reduces).
  static bool reduces(const GroupLayout& G) { return G.kind != GroupKind::expert; }

  void wait_reduce(int g) {
    if (reduce_waited_[static_cast<std::size_t>(g)] || !reduces(group(g))) return;
    reduce_waited_[static_cast<std::size_t>(g)] = true;
    emit(Op::wait_reduce, g, Phase::backward_comm, true);
  }

  // Everything the optimizer needs before it may touch g's gradients.
  void gradients_ready(int g) {
    wait_reduce(g);
    if (has_stage2(g) && !stage2_waited_[static_cast<std::size_t>(g)]) {
      stage2_waited_[static_cast<std::size_t>(g)] = true;
      emit(Op::wait_stage2, g, Phase::backward_comm, true);
    }
  }

  // --clip-norm: the norm needs every gradient, so every reduce lands first; then one world
  // all-reduce at the same place on every rank, and the scaling before any optimizer op.
  void clip() {
    for (int g = 0; g < n_; ++g) gradients_ready(g);
    emit(Op::clip_partial, -1, Phase::optimizer_other, false);
    emit(Op::issue_clip, -1, Phase::optimizer_other, true);
    emit(Op::wait_clip, -1, Phase::optimizer_other, true);
    emit(Op::clip_scale, -1, Phase::optimizer_other, false);
  }

  bool prepares(int g) const {
    for (int p : group(g).members)
      if (param(p).updated_here && param(p).muon) return true;
    return false;
  }

  void prepare_and_gather(int g, int gather_position) {
    gradients_ready(g);
    const bool gathers = group(g).gathers();
    if (gathers) gather_base_of_[g] = L_.gather_base(g, gather_position);
    // fsdp-muon's prepare writes each Nesterov input shard into its own part of the slot, so
    // the all-gather runs in place.
    if (prepares(g))
      emit(Op::prepare, g, Phase::optimizer_other, false).gather_base = gather_base(g);
    if (gathers)
      emit(Op::issue_gather, g, Phase::optimizer_other, true).gather_base = gather_base(g);
  }

  std::int64_t gather_base(int g) const {
    const auto it = gather_base_of_.find(g);
    return it == gather_base_of_.end() ? -1 : it->second;
  }

  void wait_gather(int g) {
    if (!group(g).gathers()) return;
    emit(Op::wait_gather, g, Phase::optimizer_other, true).gather_base = gather_base(g);
  }

  void newton_schulz(int g) {
    for (int p : group(g).members) {
      const ParamLayout& prm = param(p);
      if (!prm.updated_here || !prm.muon) continue;
      if (prm.tp_sharded()) {
        tp_exchange(g, p, prm.tp_owner == L_.tp_rank());
        continue;
      }
      StepOp& s = emit(Op::newton_schulz, g, Phase::optimizer_ns, false);
      s.param = p;
      s.gather_base = gather_base(g);  // fsdp-muon: NS in place on the gathered input
    }
  }

  // --tp: the TP group of this DP owner orthogonalizes the logical matrix together.
  void tp_exchange(int g, int p, bool tp_owner) {
    const auto one = [&](Op op, Phase phase, bool exposed) {
      emit(op, g, phase, exposed).param = p;
    };
    one(Op::tp_stage, Phase::optimizer_other, false);
    one(Op::tp_gather, Phase::optimizer_other, true);
    if (tp_owner) {
      one(Op::tp_assemble, Phase::optimizer_other, false);
      one(Op::newton_schulz, Phase::optimizer_ns, false);
      one(Op::tp_split, Phase::optimizer_other, false);
    }
    one(Op::tp_scatter, Phase::optimizer_other, true);
  }

  void apply(int g) {
    for (int p : group(g).members)
      if (param(p).updated_here) {
        StepOp& s = emit(Op::apply, g, Phase::optimizer_other, false);
        s.param = p;
        s.gather_base = gather_base(g);
      }
  }

  void publish(int g) {
    const auto& G = group(g);
    if ((L_.hsdp() && G.kind == GroupKind::dmuon_site && has_rooted_pair(L_, G)) ||
        publishes_replicas(L_, G))
      emit(Op::publish, g, Phase::optimizer_other, true);
  }

  void optimizer_per_group() {
    std::vector<int> gathering;
    for (int g = 0; g < n_; ++g)
      if (group(g).gathers()) gathering.push_back(g);
    std::vector<bool> prepared(static_cast<std::size_t>(n_), false);
    int next_gather = 0;  // index into `gathering` of the next group to prepare
    auto prepare = [&](int g) {
      if (prepared[static_cast<std::size_t>(g)]) return;
      prepared[static_cast<std::size_t>(g)] = true;
      int position = 0;
      if (group(g).gathers()) position = next_gather++;
      prepare_and_gather(g, position);
    };
    for (int g = 0; g < n_; ++g) {
      prepare(g);
      if (group(g).gathers()) {
        // Keep one all-gather in flight ahead: the next gathering group's inputs move while
        // this group's Newton–Schulz runs.
        if (next_gather < static_cast<int>(gathering.size()))
          prepare(gathering[static_cast<std::size_t>(next_gather)]);
        wait_gather(g);
      }
      newton_schulz(g);
      apply(g);
      publish(g);
    }
  }

  // The reference's optimizer (dmuon/optim/muon.py, its asynchronous path): the whole reduce
  // tail, then the DMuon sites group by group in forward order, then AdamW over the other
  // groups (no gathers: dmuon's groups all-gather nothing in the optimizer).
  void optimizer_reference() {
    const auto site = [&](int g) { return group(g).kind == GroupKind::dmuon_site; };
    for (int g = 0; g < n_; ++g)
      if (site(g)) wait_reduce(g);
    for (bool sites : {true, false})
      for (int g = 0; g < n_; ++g) {
        if (site(g) != sites) continue;
        prepare_and_gather(g, 0);
        newton_schulz(g);
        apply(g);
        publish(g);
      }
  }

  void optimizer_all_then_publish() {
    int position = 0;
    for (int g = 0; g < n_; ++g) prepare_and_gather(g, group(g).gathers() ? position++ : 0);
    for (int g = 0; g < n_; ++g) wait_gather(g);
    for (int g = 0; g < n_; ++g) newton_schulz(g);
    for (int g = 0; g < n_; ++g) apply(g);
    for (int g = 0; g < n_; ++g) publish(g);
  }

  static constexpr std::size_t kBlock = 256;  // 18 KB of ops: stays in the L1/L2 cache
  const ScheduleSink* sink_;
  const StepLayout& L_;
  const StepSpec& o_;
  int n_;
  bool z3_;
  int issued_ = 0;
  std::vector<std::int64_t> weight_base_, grad_base_;
  std::vector<bool> reduce_waited_, stage2_waited_;
  int micro_ = 0;
  bool keep_gathered_ = false;  // --pp, Z2: this backward leaves the weights gathered
  std::map<int, std::int64_t> gather_base_of_;
  Schedule ops_;
};

}  // namespace

StepRunModel step_run_model(const StepSpec& spec) {
  StepRunModel m;
  if (!spec.reference_dmuon()) return m;
  m.barrier = false;
  m.comm_issue_order = true;
  m.serial_rooted_calls = true;
  return m;
}

Schedule make_schedule(const StepLayout& layout, const StepSpec& options) {
  return make_schedule(layout, options, Schedule());
}

Schedule make_schedule(const StepLayout& layout, const StepSpec& options, Schedule reuse) {
  return Builder(layout, options, std::move(reuse)).build();
}

void stream_schedule(const StepLayout& layout, const StepSpec& options, const ScheduleSink& sink) {
  Builder(layout, options, Schedule(), &sink).build();
}

std::vector<PackCopy> pack_copies(const StepLayout& L, const StepOp& op) {
  std::vector<PackCopy> copies;
  if (op.op != Op::pack || op.group < 0) return copies;
  const auto& g = L.groups[static_cast<std::size_t>(op.group)];
  if (g.kind == GroupKind::dmuon_site) {
    for (int pi : g.pairs) {
      const auto& pr = L.pairs[static_cast<std::size_t>(pi)];
      if (pr.rooted_here) {
        if (pr.alt_wire)  // --route dtype: its own region of the alt weight arena
          copies.push_back(
              {pr.master_offset, pr.weight_offset, pr.numel, Arena::alt_weights, pr.wire});
        else
          copies.push_back({pr.master_offset, op.weight_base + pr.weight_offset, pr.numel,
                            Arena::weight_pool, L.wire});
      }
    }
    return copies;
  }
  for (int pi : g.members) {
    const auto& p = L.params[static_cast<std::size_t>(pi)];
    // --route dtype: its own region of the alt weight arena (no pool slot, no base).
    const Arena to = p.alt_wire ? Arena::alt_weights : Arena::weight_pool;
    const std::int64_t region = (p.alt_wire ? 0 : op.weight_base) + p.weight_offset;
    if (g.kind == GroupKind::fsdp)
      copies.push_back({p.master_offset, region + p.shard_begin, p.chunk, to, p.wire});
    else
      copies.push_back({p.master_offset, region, p.numel, to, p.wire});
  }
  return copies;
}

Location gradient_location(const StepLayout& L, int param, std::int64_t grad_base) {
  const auto& p = L.params.at(static_cast<std::size_t>(param));
  if (p.alt_grad) return {Arena::alt_grads, p.grad_offset};
  if (p.grad_persistent) return {Arena::grad_arena, p.grad_offset};
  return {Arena::grad_pool, grad_base + p.grad_offset};
}

Location locate(const StepLayout& L, const BufferRef& ref) {
  using Kind = BufferRef::Kind;
  switch (ref.kind) {
    case Kind::clip_norm: return {Arena::clip_scalar, 0};
    case Kind::tp_send: return {Arena::tp_send, 0};
    case Kind::tp_recv: return {Arena::tp_recv, 0};
    case Kind::tp_matrix: return {Arena::tp_matrix, 0};
    case Kind::tp_shards: return {Arena::tp_matrix, L.tp_matrix_elems() / 2};
    default: break;
  }
  if (ref.pair >= 0) {
    const auto& pr = L.pairs.at(static_cast<std::size_t>(ref.pair));
    switch (ref.kind) {
      case Kind::weights:
        if (pr.alt_wire) return {Arena::alt_weights, pr.weight_offset};
        return {Arena::weight_pool, ref.base + pr.weight_offset};
      case Kind::grads:
        if (pr.alt_grad) return {Arena::alt_grads, pr.grad_offset};
        if (pr.grad_persistent) return {Arena::grad_arena, pr.grad_offset};
        return {Arena::grad_pool, ref.base + pr.grad_offset};
      case Kind::master:
        if (pr.master_offset >= 0) return {Arena::master, pr.master_offset};
        break;
      default: break;
    }
  } else if (ref.param >= 0) {
    const auto& p = L.params.at(static_cast<std::size_t>(ref.param));
    switch (ref.kind) {
      case Kind::weights:
        if (p.alt_wire) return {Arena::alt_weights, p.weight_offset};
        return {Arena::weight_pool, ref.base + p.weight_offset};
      case Kind::grads: return gradient_location(L, ref.param, ref.base);
      case Kind::grad_shard:
        if (p.grad_shard_offset >= 0)
          return {p.alt_grad ? Arena::alt_grads : Arena::grad_arena, p.grad_shard_offset};
        break;
      case Kind::gather:
        if (p.gather_offset >= 0 && p.alt_wire) return {Arena::alt_gather, p.gather_offset};
        if (p.gather_offset >= 0) return {Arena::gather_pool, ref.base + p.gather_offset};
        break;
      case Kind::ns_input:
        if (p.muon && p.state_offset >= 0) return {Arena::ns_input, p.state_offset};
        break;
      default: break;
    }
  }
  throw std::logic_error("step schedule: a collective names a buffer the layout does not have");
}

namespace {

// The TP exchange of one parameter (docs/METRICS.md "Tensor parallelism"): its T local shards
// of the Nesterov input to the TP owner in the gradients' wire type (each one's own shard
// too), and the fp32 Newton–Schulz output back, count = the local shard each.
std::vector<CollectiveCall> tp_collectives(const StepLayout& L, const StepOp& op) {
  using Kind = BufferRef::Kind;
  const auto& p = L.params.at(static_cast<std::size_t>(op.param));
  if (!p.tp_sharded())
    throw std::logic_error("step schedule: a TP exchange of '" + p.name +
                           "', which is not TP-sharded");
  CollectiveCall call;
  call.count = p.numel;
  call.root = p.tp_owner;
  if (op.op == Op::tp_gather) {
    call.kind = comm::CollectiveKind::gather;
    call.dtype = on_wire(L.wire);
    call.buffer = BufferRef{Kind::tp_send, -1, op.param, 0};
    call.recv = BufferRef{Kind::tp_recv, -1, op.param, 0};
  } else {
    call.kind = comm::CollectiveKind::scatter;
    call.dtype = comm::DType::f32;
    call.buffer = BufferRef{Kind::tp_shards, -1, op.param, 0};
    call.recv = BufferRef{Kind::ns_input, -1, op.param, 0};
  }
  return {call};
}

// --clip-norm: the world all-reduce of the squared (or max) gradient norm, one fp32.
CollectiveCall clip_call(const StepSpec& o) {
  CollectiveCall call;
  call.kind = comm::CollectiveKind::all_reduce;
  call.count = 1;
  call.dtype = comm::DType::f32;
  call.buffer = BufferRef{BufferRef::Kind::clip_norm, -1, -1, 0};
  call.op = o.clip_norm_type == ClipNormType::inf ? CollectiveCall::Reduce::max
                                                  : CollectiveCall::Reduce::sum;
  return call;
}

// The collectives of one group's issue op, by op and group kind; one instance per call.
class GroupCalls {
 public:
  GroupCalls(const StepLayout& layout, const StepOp& op, const StepSpec& options)
      : L_(layout),
        op_(op),
        g_(layout.groups[static_cast<std::size_t>(op.group)]),
        packed_(options.grad_reduce == plan::GradReduce::packed) {}

  std::vector<CollectiveCall> build() {
    switch (op_.op) {
      case Op::issue_weights: weights(); break;
      case Op::issue_reduce: reduce(); break;
      case Op::issue_stage2: stage2(); break;
      case Op::issue_gather: gather(); break;
      case Op::publish: publish(); break;
      default: break;
    }
    return std::move(calls_);
  }

 private:
  using Kind = BufferRef::Kind;
  using CollectiveKind = comm::CollectiveKind;

  CollectiveCall& add(CollectiveKind kind, std::int64_t count, comm::DType dtype, int root,
                      BufferRef buf) {
    CollectiveCall call;
    call.kind = kind;
    call.count = count;
    call.dtype = dtype;
    call.root = root;
    call.buffer = buf;
    calls_.push_back(call);
    return calls_.back();
  }
  static BufferRef pair_ref(Kind k, int pr, std::int64_t base) { return {k, pr, -1, base}; }
  static BufferRef param_ref(Kind k, int p, std::int64_t base) { return {k, -1, p, base}; }
  const PairLayout& pair(int pr) const { return L_.pairs[static_cast<std::size_t>(pr)]; }
  const ParamLayout& param(int p) const { return L_.params[static_cast<std::size_t>(p)]; }

  // DMuon gradients of one pair to `root`: per parameter or the packed buffer.
  void reduce_pair(int pr, int root, std::int64_t base) {
    if (packed_) {
      add(CollectiveKind::reduce, pair(pr).numel, pair_grad_wire(pair(pr)), root,
          pair_ref(Kind::grads, pr, base));
      return;
    }
    for (int p : pair(pr).members)
      add(CollectiveKind::reduce, param(p).numel, param_grad_wire(param(p)), root,
          param_ref(Kind::grads, p, base));
  }

  // DMuon: each pair's packed weights from its owner column; FSDP: each member's all-gather.
  void weights() {
    if (g_.kind == GroupKind::dmuon_site) {
      for (int pr : g_.pairs)
        add(CollectiveKind::broadcast, pair(pr).numel, pair_wire(pair(pr)), pair(pr).owner_column,
            pair_ref(Kind::weights, pr, op_.weight_base));
    } else if (g_.kind == GroupKind::fsdp) {
      for (int p : g_.members)
        add(CollectiveKind::all_gather, param(p).chunk, param_wire(param(p)), -1,
            param_ref(Kind::weights, p, op_.weight_base));
    }
  }

  void reduce() {
    if (g_.kind == GroupKind::dmuon_site || !g_.pairs.empty()) {
      // ddp-dmuon's pairs: persistent gradients (the grad base is unused), root = the owner.
      for (int pr : g_.pairs) reduce_pair(pr, pair(pr).owner_column, op_.grad_base);
      return;
    }
    for (int p : g_.members) {
      if (g_.kind == GroupKind::fsdp)
        add(CollectiveKind::reduce_scatter, param(p).chunk, param_grad_wire(param(p)), -1,
            param_ref(Kind::grads, p, op_.grad_base))
            .recv = param_ref(Kind::grad_shard, p, 0);
      else
        add(CollectiveKind::all_reduce, param(p).numel, param_grad_wire(param(p)), -1,
            param_ref(Kind::grads, p, 0));
    }
  }

  // HSDP's second stage, across replicas: DMuon pairs rooted here, FSDP shards.
  void stage2() {
    if (g_.kind == GroupKind::dmuon_site) {
      for (int pr : g_.pairs)
        if (pair(pr).rooted_here) reduce_pair(pr, pair(pr).owner_row, 0);
    } else if (g_.kind == GroupKind::fsdp) {
      for (int p : g_.members)
        add(CollectiveKind::all_reduce, param(p).chunk, param_grad_wire(param(p)), -1,
            param_ref(Kind::grad_shard, p, 0));
    }
  }

  void gather() {
    for (int p : g_.members)
      if (param(p).gather_offset >= 0)
        add(CollectiveKind::all_gather, param(p).chunk, param_wire(param(p)), -1,
            param_ref(Kind::gather, p, op_.gather_base));
  }

  void publish() {
    for (int pr : g_.pairs) {
      if (publishes_replicas(L_, g_))  // ddp-dmuon: the owner's fp32 master to every replica
        add(CollectiveKind::broadcast, pair(pr).numel, comm::DType::f32, pair(pr).owner_column,
            pair_ref(Kind::master, pr, 0));
      else if (pair(pr).rooted_here)
        add(CollectiveKind::broadcast, pair(pr).numel, comm::DType::f32, pair(pr).owner_row,
            pair_ref(Kind::master, pr, 0));
    }
  }

  const StepLayout& L_;
  const StepOp& op_;
  const GroupLayout& g_;
  const bool packed_;
  std::vector<CollectiveCall> calls_;
};

}  // namespace

std::vector<CollectiveCall> collectives_of(const StepLayout& L, const StepOp& op,
                                           const StepSpec& o) {
  if (op.op == Op::issue_clip) return {clip_call(o)};
  if (op.op == Op::tp_gather || op.op == Op::tp_scatter) return tp_collectives(L, op);
  if (op.group < 0) return {};
  return GroupCalls(L, op, o).build();
}

}  // namespace dmuon::engine
