#include "dmuon/engine/exec/host_backend.hpp"

#include <fmt/format.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "dmuon/base/error.hpp"
#include "dmuon/comm/abort.hpp"
#include "dmuon/engine/exec/host_activation.hpp"
#include "dmuon/engine/exec/linear_work.hpp"
#include "dmuon/engine/exec/memory_tracker.hpp"
#include "dmuon/engine/exec/optimizer_step.hpp"
#include "dmuon/engine/exec/pipeline_link.hpp"
#include "dmuon/engine/step/grad_clip.hpp"
#include "dmuon/engine/step/pipeline_order.hpp"
#include "kernels/convert.hpp"
#include "kernels/newton_schulz.hpp"
#include "kernels/tp_blocks.hpp"

namespace dmuon::engine {
namespace {

using F32View = Kokkos::View<float*, Kokkos::HostSpace>;
using U16View = Kokkos::View<std::uint16_t*, Kokkos::HostSpace>;
using kernels::Dtype;

// A buffer of wire elements: fp32, or a 16-bit type held as its bit patterns.
class WireBuffer {
 public:
  WireBuffer() = default;
  WireBuffer(const std::string& label, std::int64_t n, Dtype type) : type_(type) {
    const auto size = static_cast<std::size_t>(n);
    if (type == Dtype::f32)
      f32_ = F32View(label, size);
    else
      u16_ = U16View(label, size);
  }
  Dtype type() const { return type_; }
  void* at(std::int64_t offset) {
    return type_ == Dtype::f32 ? static_cast<void*>(f32_.data() + offset)
                               : static_cast<void*>(u16_.data() + offset);
  }
  std::int64_t bytes() const {
    return static_cast<std::int64_t>(f32_.span() * sizeof(float) +
                                     u16_.span() * sizeof(std::uint16_t));
  }

 private:
  Dtype type_ = Dtype::f32;
  F32View f32_;
  U16View u16_;
};

class SteadyTimer final : public PhaseTimer {
 public:
  void start_step() override {
    ph_ = {};
    open_ = false;
    step_start_ = Clock::now();
  }
  void switch_to(Phase phase, bool exposed) override {
    pause();
    phase_ = phase;
    exposed_ = exposed;
    open_ = true;
    start_ = Clock::now();
  }
  void pause() override {
    if (!open_) return;
    const double ms = ms_since(start_);
    ph_[static_cast<std::size_t>(phase_)] += ms;
    if (exposed_) ph_[static_cast<std::size_t>(Phase::exposed_comm)] += ms;
    open_ = false;
  }
  std::array<double, kPhaseCount> finish_step() override {
    pause();
    ph_[static_cast<std::size_t>(Phase::step)] = ms_since(step_start_);
    return ph_;
  }

 private:
  using Clock = std::chrono::steady_clock;
  static double ms_since(Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
  }
  std::array<double, kPhaseCount> ph_{};
  Clock::time_point step_start_, start_;
  Phase phase_ = Phase::step;
  bool exposed_ = false;
  bool open_ = false;
};

class HostBackend final : public StepBackend {
 public:
  HostBackend(const model::ModuleTree& tree, const StepLayout& layout, const EngineOptions& o,
              const comm::RankGroups& groups)
      : L_(layout),
        step_(o.step),
        seed_(o.run.seed),
        wire_(layout.wire),
        reduce_(layout.reduce),
        opt_(muon_config(o)) {
    if (groups.grid() != L_.me.grid || groups.world_rank() != L_.me.rank)
      throw std::logic_error("host backend: the rank groups are not the layout's grid");
    const auto make = [&](CommGroup g) {
      return comm::make_communicator(comm::Backend::mpi, groups.comm(g));
    };
    shard_ = make(CommGroup::shard);
    if (L_.hsdp()) replicate_ = make(CommGroup::replicate);
    if (o.step.clip_norm > 0) world_ = make(CommGroup::world);
    if (L_.tp() > 1) tp_ = make(CommGroup::tp);
    if (L_.me.grid.has_expert_groups()) expert_ = make(CommGroup::expert);
    // The routed tokens' all-to-alls (--ep with --seq-len: the activation work's EP ops).
    if (L_.me.grid.ep > 1 && L_.activation) ep_ = make(CommGroup::ep);
    if (o.step.stages.active()) {  // --pp: this stage's boundaries
      pipeline_ = make(CommGroup::pipeline);
      link_ = std::make_unique<PipelineLink>(*pipeline_, o.step.stages, o.step.accum);
    }
    const auto n = [](std::int64_t e) { return static_cast<std::size_t>(e); };
    master_ = F32View("dmuon::master", n(L_.master_elems));
    state_ = F32View("dmuon::optimizer_state", n(L_.state_elems));
    state2_ = F32View("dmuon::adamw_exp_avg_sq", n(L_.second_state_elems));
    input_ = F32View("dmuon::ns_input", n(L_.state_elems));
    tp_send_ = WireBuffer("dmuon::tp_send", L_.tp_send_elems(), wire_);
    tp_recv_ = WireBuffer("dmuon::tp_recv", L_.tp_recv_elems(), wire_);
    tp_matrix_ = F32View("dmuon::tp_matrix", n(L_.tp_matrix_elems()));
    grad_arena_ = WireBuffer("dmuon::grad_arena", L_.grad_arena_elems, reduce_);
    weight_pool_ = WireBuffer("dmuon::weight_pool", L_.weight_pool_elems, wire_);
    grad_pool_ = WireBuffer("dmuon::grad_pool", L_.grad_pool_elems, reduce_);
    gather_pool_ = WireBuffer("dmuon::gather_pool", L_.gather_pool_elems, wire_);
    // --route dtypes: the parameters travelling in the other type (step_layout.hpp).
    alt_weights_ = WireBuffer("dmuon::alt_weights", L_.alt_weight_elems, L_.alt_wire);
    alt_grads_ = WireBuffer("dmuon::alt_grads", L_.alt_grad_elems, L_.alt_reduce);
    alt_gather_ = WireBuffer("dmuon::alt_gather", L_.alt_gather_elems, L_.alt_wire);
    const bool alt = L_.alt_weight_elems + L_.alt_grad_elems + L_.alt_gather_elems > 0;
    std::int64_t max_numel = 0;
    for (const auto& p : L_.params) max_numel = std::max(max_numel, p.full_elems());
    if (wire_ != Dtype::f32) {
      // Compute runs in fp32 on the host: it reads an fp32 image of what arrived.
      compute_pool_ = F32View("dmuon::compute_weights", n(L_.weight_pool_elems));
      gather_f32_ = F32View("dmuon::gather_fp32", n(L_.gather_pool_elems));
    }
    if (alt && L_.alt_wire != Dtype::f32) {
      alt_compute_ = F32View("dmuon::alt_compute_weights", n(L_.alt_weight_elems));
      alt_gather_f32_ = F32View("dmuon::alt_gather_fp32", n(L_.alt_gather_elems));
    }
    // A 16-bit gradient (or fsdp-muon gather) is computed and read through an fp32 copy.
    if (wire_ != Dtype::f32 || reduce_ != Dtype::f32 || (alt && L_.alt_wire != Dtype::f32) ||
        (alt && L_.alt_reduce != Dtype::f32))
      scratch_ = F32View("dmuon::grad_fp32", n(max_numel));
    zeros_.assign(static_cast<std::size_t>(L_.shards()), 0.0f);  // padding < G elements
    if (L_.activation) activation_ = std::make_unique<HostActivation>(*L_.activation, ep_.get());
    hold_persistent();
    const std::int64_t global = o.step.global_samples(L_.me.grid.dp_size());
    std::vector<float> init;
    work_.reserve(L_.params.size());
    for (const auto& p : L_.params) {
      const std::uint64_t key = p.data_key;
      work_.emplace_back(tree, p.pid, global, p.data_rank, p.data_ranks, o.step.accum, key,
                         o.step.compute_of(p.pid),
                         in_flight_micro_batches(o.step.stages, o.step.accum));
      if (p.master_offset < 0) continue;
      init.assign(n(p.numel), 0.0f);
      init_weights(o.run.seed, key, init.data(), p.numel, p.shape.cols);
      float* dst = master_.data() + p.master_offset;
      if (p.sharded()) {
        for (std::int64_t j = 0; j < p.chunk; ++j)
          dst[j] = p.shard_begin + j < p.numel ? init[n(p.shard_begin + j)] : 0.0f;
      } else {
        std::copy(init.begin(), init.end(), dst);
      }
    }
  }

  comm::Communicator* comm(CommGroup group) override {
    switch (group) {
      case CommGroup::shard: return shard_.get();
      case CommGroup::replicate: return replicate_.get();
      case CommGroup::world: return world_.get();
      case CommGroup::tp: return tp_.get();
      case CommGroup::expert: return expert_.get();
      case CommGroup::ep: return ep_.get();
      case CommGroup::pipeline: return pipeline_.get();
    }
    return nullptr;
  }

  void* buffer(const BufferRef& ref) override { return at(locate(L_, ref)); }

  // Kernels may still be running under a parallel Kokkos backend: MPI must see their results.
  void before_issue(const StepOp&) override { Kokkos::fence(); }
  void wait(comm::Batch& batch) override { batch.wait(); }
  void order_after(comm::Batch& batch, CommGroup) override { batch.wait(); }
  bool wants_progress() const override { return true; }
  void set_progress(std::function<void()> poll) override { poll_ = std::move(poll); }

  void begin_step(long) override {}

  void pack(const StepOp& op) override {
    const bool replicas = computes_on_master(group(op.group).kind);
    for (const PackCopy& c : pack_copies(L_, op)) {
      // Replicas in fp32: compute reads the master itself (weights_of), nothing to copy.
      if (replicas && c.dtype == Dtype::f32) continue;
      void* to = at(Location{c.to, c.weight});
      to_wire(master_.data() + c.master, to, c.count, c.dtype);
      // Replicas on a 16-bit wire: compute reads the rounded copy (mixed-precision compute).
      if (replicas)
        kernels::host::convert(to, c.dtype, compute_image(c.to) + c.weight, Dtype::f32,
                               static_cast<std::size_t>(c.count));
    }
  }

  void weights_arrived(const StepOp& op) override {
    const auto& g = group(op.group);
    if (wire_ != Dtype::f32)
      kernels::host::convert(weight_pool_.at(op.weight_base), wire_,
                             compute_pool_.data() + op.weight_base, Dtype::f32,
                             static_cast<std::size_t>(g.weight_elems));
    if (g.alt_weight_elems == 0 || L_.alt_wire == Dtype::f32) return;
    for (int pi : g.members) {  // --route bf16 parameters: their own regions
      const auto& p = param(pi);
      if (!p.alt_wire) continue;
      const std::int64_t len = p.full_elems();
      kernels::host::convert(alt_weights_.at(p.weight_offset), p.wire,
                             alt_compute_.data() + p.weight_offset, Dtype::f32,
                             static_cast<std::size_t>(len));
    }
  }

  void forward(const StepOp& op, long step) override {
    const auto& p = param(op.param);
    auto& work = work_[static_cast<std::size_t>(op.param)];
    work.set_micro(op.micro);
    work.forward(step_.compute_of(p.pid), seed_, step, weights_of(p, op.weight_base), poll_);
  }

  void backward(const StepOp& op, long step) override {
    const auto& p = param(op.param);
    void* grad = grad_of(op.param, op.grad_base);
    const Dtype type = p.grad_wire;
    float* out = type == Dtype::f32 ? static_cast<float*>(grad) : scratch_.data();
    // --accum on a 16-bit wire: accumulate in fp32 onto what the earlier micro-steps left.
    if (op.accumulate && type != Dtype::f32)
      kernels::host::convert(grad, type, out, Dtype::f32, static_cast<std::size_t>(p.numel));
    auto& work = work_[static_cast<std::size_t>(op.param)];
    work.set_micro(op.micro);
    work.backward(step_.compute_of(p.pid), seed_, step, weights_of(p, op.weight_base), out, poll_,
                  op.accumulate);
    if (type != Dtype::f32) to_wire(out, grad, p.numel, type);
    if (p.padding() > 0) {
      // The pooled slot held another group's gradient: the padding must reduce as zeros
      // (sharded_adamw: its persistent full gradient in the grad arena).
      const auto loc = gradient_location(L_, op.param, op.grad_base);
      to_wire(zeros_.data(), at(Location{loc.arena, loc.offset + p.numel}), p.padding(), type);
    }
  }

  void poison_gradient(const StepOp& op) override {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    to_wire(&nan, grad_of(op.param, op.grad_base), 1, param(op.param).grad_wire);
  }

  void release_weights(const StepOp&) override {}

  void prepare(const StepOp& op, long step) override {
    step_now_ = step;
    for (int pi : group(op.group).members) {
      const auto& p = param(pi);
      if (!p.updated_here || !p.muon) continue;
      float* momentum = state_.data() + p.state_offset;
      float* input = input_.data() + p.state_offset;
      const auto n = static_cast<std::size_t>(p.state_elems);
      if (p.storage == Storage::sharded) {
        check_gradient(p,
                       opt_.prepare(fp32_view(consumed_gradient(p), p.chunk, p.grad_wire), momentum,
                                    input, n, step),
                       step);
        // Own part of the fsdp-muon gather (in the weights' type), which then runs in place.
        const Location gather = locate(L_, {BufferRef::Kind::gather, -1, pi, op.gather_base});
        to_wire(input, at(Location{gather.arena, gather.offset + p.shard_begin}), p.chunk, p.wire);
      } else {
        check_gradient(p,
                       opt_.prepare(fp32_view(consumed_gradient(p), p.numel, p.grad_wire), momentum,
                                    input, n, step),
                       step);
      }
    }
  }

  void newton_schulz(const StepOp& op) override {
    const auto& p = param(op.param);
    const bool tp = p.tp_sharded();  // on its TP owner, after tp_assemble: the logical matrix
    float* x = tp ? tp_matrix_.data() : ns_matrix(p, op.gather_base, true);
    const std::int64_t rows = tp ? p.logical.rows : p.shape.rows;
    const std::int64_t cols = tp ? p.logical.cols : p.shape.cols;
    // A non-finite input (a gradient poisoned here or on another rank) ends the run after this
    // step on every rank; the iteration is skipped rather than thrown out of mid-step.
    if (kernels::host::count_non_finite(x, static_cast<std::size_t>(rows * cols)) != 0) {
      note_nonfinite(fmt::format("non-finite Newton-Schulz input in parameter '{}' at step {}",
                                 p.name, step_now_));
      return;
    }
    opt_.newton_schulz(x, rows, cols, p.name);
  }

  void tp_stage(const StepOp& op) override {
    const auto& p = param(op.param);
    to_wire(input_.data() + p.state_offset, tp_send_.at(0), p.numel, wire_);
  }

  // The gathered shards widened into the shards region, then assembled into the matrix.
  void tp_assemble(const StepOp& op) override {
    const auto& p = param(op.param);
    float* shards = tp_shards();
    kernels::host::convert(tp_recv_.at(0), wire_, shards, Dtype::f32,
                           static_cast<std::size_t>(L_.tp() * p.numel));
    kernels::host::tp_assemble(shards, tp_matrix_.data(), p.logical.rows, p.logical.cols, p.tp_dim,
                               L_.tp());
  }

  void tp_split(const StepOp& op) override {
    const auto& p = param(op.param);
    kernels::host::tp_split(tp_matrix_.data(), tp_shards(), p.logical.rows, p.logical.cols,
                            p.tp_dim, L_.tp());
  }

  void apply(const StepOp& op, long step) override {
    const auto& p = param(op.param);
    float* master = master_.data() + p.master_offset;
    if (p.muon) {
      std::size_t bad = 0;
      if (p.sharded()) {
        // The shard's part of the full Newton–Schulz output.
        bad = opt_.apply(master, ns_matrix(p, op.gather_base, false) + p.shard_begin,
                         static_cast<std::size_t>(p.shard_len()), p.shape.rows, p.shape.cols);
      } else {
        // TP-sharded: a shard of the full update, with the logical matrix's Muon scale.
        bad = opt_.apply(master, input_.data() + p.state_offset, static_cast<std::size_t>(p.numel),
                         p.logical.rows, p.logical.cols);
      }
      if (bad != 0)
        note_nonfinite(fmt::format("non-finite weight in parameter '{}' at step {}", p.name, step));
      return;
    }
    const float* grad = fp32_view(consumed_gradient(p), p.own_elems(), p.grad_wire);
    check_gradient(p,
                   opt_.adamw(master, grad, state_.data() + p.state_offset,
                              state2_.data() + p.second_state_offset,
                              static_cast<std::size_t>(p.state_elems), step),
                   step);
  }

  void clip_partial(const StepOp&) override {
    double partial = 0;
    for (const auto& p : L_.params) {
      if (!p.updated_here) continue;
      const ClipSpan span = clip_counted(L_, p);
      if (span.count == 0) continue;
      const float* g = fp32_view(consumed_gradient(p), span.begin + span.count, p.grad_wire);
      clip_accumulate(step_.clip_norm_type, g + span.begin, span.count, partial);
    }
    clip_scalar_ = static_cast<float>(partial);
  }

  void clip_scale(const StepOp&) override {
    const float coef = clip_coefficient(
        step_.clip_norm, clip_total_norm(step_.clip_norm_type, static_cast<double>(clip_scalar_)));
    if (coef == 1.0f) return;  // clip_grad_norm_ multiplies by 1: nothing changes
    for (const auto& p : L_.params) {
      if (!p.updated_here) continue;
      const std::int64_t n = p.own_elems();
      void* grad = consumed_gradient(p);
      const Dtype type = p.grad_wire;
      float* g = type == Dtype::f32 ? static_cast<float*>(grad) : scratch_.data();
      if (type != Dtype::f32)
        kernels::host::convert(grad, type, g, Dtype::f32, static_cast<std::size_t>(n));
      for (std::int64_t i = 0; i < n; ++i) g[i] *= coef;
      if (type != Dtype::f32) to_wire(g, grad, n, type);
    }
  }

  void activation(const StepOp& op) override {
    activation_->run(unit_ops(*L_.activation, op), poll_);
  }

  void pipeline_transfer(const StepOp& op) override {
    if (!link_) throw std::logic_error("host backend: a pipeline op without --pp");
    link_->run(op);
  }
  void end_step(long) override {
    if (link_) link_->finish_step();
    Kokkos::fence();
  }
  std::string take_nonfinite() override { return std::exchange(nonfinite_, std::string()); }
  double take_token_exchange_ms() override {
    return activation_ ? activation_->take_exchange_ms() : 0.0;
  }
  PhaseTimer& timer() override { return timer_; }

  void read_masters(std::int64_t offset, std::int64_t count, float* host) override {
    Kokkos::fence();
    std::copy(master_.data() + offset, master_.data() + offset + count, host);
  }

  // The memory model's account of this rank's pooled buffers (docs/MEMORY.md "Measured"): a
  // group's region is held from the op that fills it to the op after which nothing reads it.
  void op_done(const StepOp& op) override {
    mem_.enter(op.phase);
    if (op.group < 0) return;
    const auto& g = group(op.group);
    const std::int64_t key = op.group;
    const auto wire = static_cast<std::int64_t>(kernels::dtype_bytes(wire_));
    const auto reduce = static_cast<std::int64_t>(kernels::dtype_bytes(reduce_));
    switch (op.op) {
      case Op::pack: {
        // Replicas: fp32 compute reads the masters, a 16-bit one a rounded copy in the pool.
        const bool fills = computes_on_master(g.kind) ? wire_ != Dtype::f32 : g.has_weight_comm();
        if (fills) mem_.hold(MemoryTerm::weights, key, wire * g.weight_elems);
        break;
      }
      case Op::release_weights: mem_.drop(MemoryTerm::weights, key); break;
      case Op::backward:
        if (g.grad_elems > 0) mem_.hold(MemoryTerm::grad_buffers, key, reduce * g.grad_elems);
        break;
      case Op::wait_reduce: mem_.drop(MemoryTerm::grad_buffers, key); break;
      case Op::prepare:  // writes this rank's shard of the gather in place
        if (g.gather_elems > 0) mem_.hold(MemoryTerm::gather_buffers, key, wire * g.gather_elems);
        break;
      case Op::apply:
        if (op.param == last_update_[static_cast<std::size_t>(op.group)])
          mem_.drop(MemoryTerm::gather_buffers, key);
        break;
      case Op::newton_schulz: {
        // One workspace in use at a time (the host caches one per shape: reserved).
        const auto& p = param(op.param);
        const MatrixShape s = p.tp_sharded() ? p.logical : p.shape;
        mem_.hold(MemoryTerm::ns_workspace, 0, opt_.workspace_bytes(s.rows, s.cols));
        mem_.drop(MemoryTerm::ns_workspace, 0);
        break;
      }
      default: break;
    }
  }

  MeasuredMemory measured_memory() const override {
    MemoryTracker m = mem_;
    std::int64_t counted = opt_.workspace_bytes(), uncounted = 0;
    for (const F32View* v : {&master_, &state_, &state2_, &input_, &tp_matrix_, &compute_pool_,
                             &gather_f32_, &alt_compute_, &alt_gather_f32_, &scratch_}) {
      const bool image = v == &compute_pool_ || v == &gather_f32_ || v == &alt_compute_ ||
                         v == &alt_gather_f32_ || v == &scratch_;
      (image ? uncounted : counted) += static_cast<std::int64_t>(v->span() * sizeof(float));
    }
    for (const WireBuffer* w : {&grad_arena_, &weight_pool_, &grad_pool_, &gather_pool_,
                                &alt_weights_, &alt_grads_, &alt_gather_, &tp_send_, &tp_recv_})
      counted += w->bytes();
    // The synthetic compute's inputs, outputs and padding zeros, the activation work's scratch,
    // the stage boundary's messages.
    for (const auto& w : work_) uncounted += w.bytes();
    uncounted += static_cast<std::int64_t>(zeros_.size() * sizeof(float)) +
                 (activation_ ? activation_->bytes() : 0) + (link_ ? link_->bytes() : 0);
    m.add_reserved(counted);
    m.add_uncounted(uncounted);
    return m.result(L_.me.rank);
  }

  std::int64_t allocated_bytes() const override {
    std::int64_t b = 0;
    for (const F32View* v : {&master_, &state_, &state2_, &input_, &compute_pool_, &gather_f32_,
                             &alt_compute_, &alt_gather_f32_, &scratch_, &tp_matrix_})
      b += static_cast<std::int64_t>(v->span() * sizeof(float));
    for (const WireBuffer* w : {&grad_arena_, &weight_pool_, &grad_pool_, &gather_pool_,
                                &alt_weights_, &alt_grads_, &alt_gather_, &tp_send_, &tp_recv_})
      b += w->bytes();
    return b + opt_.workspace_bytes() + (activation_ ? activation_->bytes() : 0) +
           (link_ ? link_->bytes() : 0);
  }

 private:
  const GroupLayout& group(int g) const { return L_.groups[static_cast<std::size_t>(g)]; }
  const ParamLayout& param(int p) const { return L_.params[static_cast<std::size_t>(p)]; }
  int index_of(const ParamLayout& p) const { return static_cast<int>(&p - L_.params.data()); }
  // The shards region of the TP matrix arena (locate(): BufferRef::Kind::tp_shards).
  float* tp_shards() { return tp_matrix_.data() + L_.tp_matrix_elems() / 2; }

  // The arenas held for the whole run, under the model's terms; the alt (--route dtype)
  // weights and gathers are persistent regions here (the model counts the weights as live
  // only while in flight).
  void hold_persistent() {
    const auto f32 = [](const F32View& v) { return static_cast<std::int64_t>(v.span() * 4); };
    mem_.hold(MemoryTerm::masters, -1, f32(master_));
    mem_.hold(MemoryTerm::optimizer_state, -1, f32(state_) + f32(state2_));
    mem_.hold(MemoryTerm::gradients, -1, grad_arena_.bytes() + alt_grads_.bytes());
    // The Nesterov input arena spans the whole state arena (it is indexed by state offsets);
    // only the Muon parameters' part is ever written: the AdamW rest is reserved, not live.
    std::int64_t muon_inputs = 0;
    for (const auto& p : L_.params)
      if (p.muon && p.updated_here) muon_inputs += 4 * p.state_elems;
    mem_.hold(MemoryTerm::ns_input, -1, muon_inputs);
    mem_.hold(MemoryTerm::tp_buffers, -1, tp_send_.bytes() + tp_recv_.bytes() + f32(tp_matrix_));
    mem_.hold(MemoryTerm::weights, -1, alt_weights_.bytes());
    mem_.hold(MemoryTerm::gather_buffers, -1, alt_gather_.bytes());
    // The last parameter of each group whose optimizer runs here: its apply ends the group's
    // use of the gather.
    last_update_.assign(L_.groups.size(), -1);
    for (std::size_t g = 0; g < L_.groups.size(); ++g)
      for (int pi : L_.groups[g].members)
        if (param(pi).updated_here) last_update_[g] = pi;
  }

  void* at(const Location& where) {
    switch (where.arena) {
      case Arena::master: return master_.data() + where.offset;
      case Arena::grad_arena: return grad_arena_.at(where.offset);
      case Arena::weight_pool: return weight_pool_.at(where.offset);
      case Arena::grad_pool: return grad_pool_.at(where.offset);
      case Arena::gather_pool: return gather_pool_.at(where.offset);
      case Arena::clip_scalar: return &clip_scalar_;
      case Arena::alt_weights: return alt_weights_.at(where.offset);
      case Arena::alt_grads: return alt_grads_.at(where.offset);
      case Arena::alt_gather: return alt_gather_.at(where.offset);
      case Arena::ns_input: return input_.data() + where.offset;
      case Arena::tp_send: return tp_send_.at(where.offset);
      case Arena::tp_recv: return tp_recv_.at(where.offset);
      case Arena::tp_matrix: return tp_matrix_.data() + where.offset;
    }
    return nullptr;
  }
  // The fp32 image compute reads of a 16-bit weight arena.
  float* compute_image(Arena arena) {
    return arena == Arena::alt_weights ? alt_compute_.data() : compute_pool_.data();
  }
  void* grad_of(int param, std::int64_t base) { return at(gradient_location(L_, param, base)); }
  // The gradient the optimizer reads: the shard (sharded) or the persistent full gradient.
  void* consumed_gradient(const ParamLayout& p) {
    WireBuffer& arena = p.alt_grad ? alt_grads_ : grad_arena_;
    return arena.at(p.storage == Storage::sharded ? p.grad_shard_offset : p.grad_offset);
  }

  // fp32 weights compute reads: the slot itself (fp32 wire), its fp32 image, or a replica.
  const float* weights_of(const ParamLayout& p, std::int64_t base) {
    const Dtype type = p.wire;
    if ((p.storage == Storage::replicated || p.storage == Storage::expert) && type == Dtype::f32)
      return master_.data() + p.master_offset;
    if (p.alt_wire)  // its own region, no pool base
      return type == Dtype::f32 ? static_cast<const float*>(alt_weights_.at(p.weight_offset))
                                : alt_compute_.data() + p.weight_offset;
    if (type == Dtype::f32)
      return static_cast<const float*>(weight_pool_.at(base + p.weight_offset));
    return compute_pool_.data() + base + p.weight_offset;
  }

  // An fp32 pointer to n elements of `type`: themselves, or their fp32 copy in the scratch
  // buffer.
  const float* fp32_view(void* data, std::int64_t n, Dtype type) {
    if (type == Dtype::f32) return static_cast<const float*>(data);
    kernels::host::convert(data, type, scratch_.data(), Dtype::f32, static_cast<std::size_t>(n));
    return scratch_.data();
  }

  // The fp32 matrix fsdp-muon's Newton–Schulz works on in place: the gathered input (fp32
  // wire) or its fp32 image (made when `load`); owners and replicas use their input buffer.
  float* ns_matrix(const ParamLayout& p, std::int64_t gather_base, bool load) {
    if (p.storage != Storage::sharded) return input_.data() + p.state_offset;
    const Location where = locate(L_, {BufferRef::Kind::gather, -1, index_of(p), gather_base});
    void* gathered = at(where);
    const Dtype type = p.wire;  // the gather travels in the weights' type
    if (type == Dtype::f32) return static_cast<float*>(gathered);
    float* image = (p.alt_wire ? alt_gather_f32_.data() : gather_f32_.data()) + where.offset;
    if (load)
      kernels::host::convert(gathered, type, image, Dtype::f32, static_cast<std::size_t>(p.numel));
    return image;
  }

  void to_wire(const float* src, void* dst, std::int64_t n, Dtype type) {
    kernels::host::convert(src, Dtype::f32, dst, type, static_cast<std::size_t>(n));
  }

  // The step goes on (its collectives must still meet); the engine ends the run after it.
  void check_gradient(const ParamLayout& p, std::size_t bad, long step) {
    if (bad != 0)
      note_nonfinite(fmt::format("non-finite gradient in parameter '{}' at step {}", p.name, step));
  }
  void note_nonfinite(std::string message) {
    if (nonfinite_.empty()) nonfinite_ = std::move(message);
  }

  const StepLayout& L_;
  StepSpec step_;  // what the step computes (its batch, compute mode, clip)
  std::uint64_t seed_;
  Dtype wire_, reduce_;  // the run's weight and gradient types (StepLayout::wire, reduce)
  std::unique_ptr<comm::Communicator> shard_, replicate_, world_, tp_, expert_, ep_, pipeline_;
  std::unique_ptr<PipelineLink> link_;  // --pp
  float clip_scalar_ = 0;               // --clip-norm: this rank's partial, then the world's
  F32View master_, state_, state2_, input_, compute_pool_, gather_f32_, alt_compute_,
      alt_gather_f32_, scratch_, tp_matrix_;
  WireBuffer grad_arena_, weight_pool_, grad_pool_, gather_pool_, alt_weights_, alt_grads_,
      alt_gather_, tp_send_, tp_recv_;
  std::vector<LinearWork> work_;
  std::unique_ptr<HostActivation> activation_;  // the step's activation work, when it has one
  std::vector<float> zeros_;
  std::function<void()> poll_;  // MPI progress between the kernels of one op
  std::string nonfinite_;       // the step's first non-finite value (note_nonfinite)
  long step_now_ = 0;           // the step prepare() last ran for (messages)
  HostOptimizer opt_;
  SteadyTimer timer_;
  MemoryTracker mem_;
  std::vector<int> last_update_;  // per group: its last parameter updated here (-1: none)
};

}  // namespace

std::unique_ptr<StepBackend> make_host_backend(const model::ModuleTree& tree,
                                               const StepLayout& layout, const EngineOptions& o,
                                               const comm::RankGroups& groups) {
  return std::make_unique<HostBackend>(tree, layout, o, groups);
}

}  // namespace dmuon::engine
