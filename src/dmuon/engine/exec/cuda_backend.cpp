// The CUDA machine for the step executor. Host code (the host compiler builds it against
// cudart and NCCL); the device work is in kernels/cuda behind its void*-stream API.
//
// Streams and ordering (the layout/schedule decide what; this file only how):
//   compute_    every kernel: pack, forward/backward GEMMs, momentum, Newton–Schulz, apply
//   weights_    broadcasts / all-gathers (and fsdp-muon's optimizer all-gathers)
//   reduce_     stage-1 gradient reduces (high priority: they gate the optimizer)
//   replicate_  HSDP stage 2 and the owners' replicate broadcasts
// A collective's stream waits on an event recorded on compute_ when it is issued (what it
// reads was produced there); compute_ waits on a batch's event where the schedule waits. The
// host synchronises once per step (end_step), polling NCCL's asynchronous errors meanwhile.
#include "dmuon/engine/exec/cuda_backend.hpp"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "dmuon/base/error.hpp"
#include "dmuon/comm/abort.hpp"
#include "dmuon/comm/first_message.hpp"
#include "dmuon/comm/nccl_check.hpp"
#include "dmuon/comm/nccl_communicator.hpp"
#include "dmuon/engine/exec/cuda_event_pool.hpp"
#include "dmuon/engine/exec/device_teardown.hpp"
#include "dmuon/engine/exec/step_trace.hpp"
#include "dmuon/engine/exec/tp_block_copies.hpp"
#include "dmuon/engine/step/accumulation.hpp"
#include "dmuon/engine/step/activation_work.hpp"
#include "dmuon/engine/step/grad_clip.hpp"
#include "dmuon/engine/step/optimizer_config.hpp"
#include "dmuon/engine/step/synthetic.hpp"
#include "kernels/cuda/kernels.hpp"

namespace dmuon::engine {

void require_cuda_backend() {}

namespace {

namespace cu = kernels::cuda;
using kernels::Dtype;

// Scratch of the activation work beyond this (bytes per half) is refused: the unfused s×s
// scores of a long sequence would not leave the step's own buffers room.
constexpr double kMaxActivationScratch = 8.0 * (1 << 30);

// Device memory of n elements of `type`, owned.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(std::int64_t n, Dtype type) : type_(type), n_(n) {
    if (n > 0) DMUON_CHECK_CUDA(cudaMalloc(&ptr_, bytes()));
  }
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(type_, o.type_);
    std::swap(n_, o.n_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  /// Address of element `offset`.
  void* at(std::int64_t offset) const {
    return static_cast<unsigned char*>(ptr_) +
           static_cast<std::size_t>(offset) * dtype_bytes(type_);
  }
  float* f32(std::int64_t offset = 0) const { return static_cast<float*>(at(offset)); }
  std::size_t bytes() const { return static_cast<std::size_t>(n_) * dtype_bytes(type_); }

 private:
  void* ptr_ = nullptr;
  Dtype type_ = Dtype::f32;
  std::int64_t n_ = 0;
};

// This process's GPU, bound by identity among the ranks of its node (device_binding.hpp),
// agreed by all ranks: the same one-line error on every rank (exit 2), the first failing rank's.
int select_device(MPI_Comm world) {
  const comm::DeviceBinding b = comm::bind_cuda_device(world, -1);
  if (!b.ok())
    throw InputError(fmt::format("--device cuda: rank {}: {}", b.failed_rank, b.problem));
  return b.ordinal;
}

// Phase segments as event pairs on the compute stream; read after the step's synchronisation.
class CudaPhaseTimer final : public PhaseTimer {
 public:
  explicit CudaPhaseTimer(cudaStream_t stream) : stream_(stream) {}

  void start_step() override {
    events_.release_all();
    segments_.clear();
    open_ = false;
    step_start_ = events_.record(stream_);
  }
  void switch_to(Phase phase, bool exposed) override {
    pause();
    segments_.push_back({phase, exposed, events_.record(stream_), 0});
    open_ = true;
  }
  void pause() override {
    if (!open_) return;
    segments_.back().stop = events_.record(stream_);
    open_ = false;
  }
  /// The step's last event (after the streams were joined); end_step records it.
  void stop_step() {
    pause();
    step_stop_ = events_.record(stream_);
  }
  std::array<double, kPhaseCount> finish_step() override {
    std::array<double, kPhaseCount> ph{};
    for (const auto& s : segments_) {
      const double ms = events_.elapsed_ms(s.start, s.stop);
      ph[static_cast<std::size_t>(s.phase)] += ms;
      if (s.exposed) ph[static_cast<std::size_t>(Phase::exposed_comm)] += ms;
    }
    ph[static_cast<std::size_t>(Phase::step)] = events_.elapsed_ms(step_start_, step_stop_);
    return ph;
  }

 private:
  struct Segment {
    Phase phase;
    bool exposed;
    std::size_t start, stop;
  };

  cudaStream_t stream_;
  CudaEventPool events_;
  std::vector<Segment> segments_;
  std::size_t step_start_ = 0, step_stop_ = 0;
  bool open_ = false;
};

// --trace stamps (step_trace.hpp): timing events recorded in stream order; mark 0, the first,
// is the origin. Slots of read marks are reused; events live as long as the backend.
class CudaTraceClock final : public TraceClock {
 public:
  CudaTraceClock(cudaStream_t compute, std::array<cudaStream_t, kStreamCount> streams)
      : compute_(compute), streams_(streams) {}

  std::size_t mark_compute() override { return events_.record(compute_); }
  std::size_t mark(Stream s) override {
    return events_.record(streams_[static_cast<std::size_t>(s)]);
  }
  bool readable(std::size_t m) override { return events_.complete(0) && events_.complete(m); }
  double seconds(std::size_t m) override { return events_.elapsed_ms(0, m) * 1e-3; }
  void release(std::size_t m) override {
    if (m != 0) events_.release(m);  // the origin stays
  }
  bool stream_ordered() const override { return true; }

 private:
  cudaStream_t compute_;
  std::array<cudaStream_t, kStreamCount> streams_;
  CudaEventPool events_;
};

class CudaBackend final : public StepBackend {
 public:
  CudaBackend(const model::ModuleTree& tree, const StepLayout& layout, const EngineOptions& o,
              const comm::RankGroups& groups, int device)
      : L_(layout),
        step_(o.step),
        seed_(o.run.seed),
        wire_(layout.wire),
        reduce_type_(layout.reduce),
        ns_type_(o.backend.ns_dtype),
        muon_(muon_config(o)),
        device_(device) {
    if (groups.grid() != L_.me.grid || groups.world_rank() != L_.me.rank)
      throw std::logic_error("CUDA backend: the rank groups are not the layout's grid");
    DMUON_CHECK_CUDA(cudaSetDevice(device_));
    create_streams();
    create_communicators(groups, o);
    allocate_arenas();
    const Dtype scratch_type = allocate_scratch();
    place_parameters(tree, o, scratch_type);
    create_ns_workspaces();
    DMUON_CHECK_CUDA(cudaDeviceSynchronize());
  }

  // After abort() nothing waits for the device (device_teardown.hpp).
  ~CudaBackend() override {
    cudaSetDevice(device_);
    teardown_.finish();
    ctx_.reset();
    timer_.reset();
    for (cudaStream_t s : {compute_, weights_, reduce_, replicate_})
      if (s) cudaStreamDestroy(s);
    cudaEventDestroy(produced_);
    cudaEventDestroy(joined_);
  }

  void abort() noexcept override { teardown_.abort(); }

  comm::Communicator* comm(CommGroup group) override {
    if (group == CommGroup::world) return world_.get();    // only with --clip-norm
    if (group == CommGroup::tp) return tp_.get();          // --tp only
    if (group == CommGroup::expert) return expert_.get();  // --ep E < G only
    if (group == CommGroup::ep) return ep_.get();          // --ep with --seq-len only
    if (group == CommGroup::pipeline) return nullptr;      // --pp runs on the host only
    return group == CommGroup::shard ? shard_.get() : replicate_comm_.get();
  }

  void* buffer(const BufferRef& ref) override { return at(locate(L_, ref)); }

  void before_issue(const StepOp& op) override {
    cudaStream_t s = stream(op_traits(op.op).stream);
    // Stage 2 reads only what stage 1 wrote: order_after() made its stream wait for that,
    // and it must not also wait for the compute queue. When the stage-1 batch was already
    // consumed (its handle empty: the compute queue waited for it), order_after() had nothing
    // to order on, and the compute queue is the one that knows stage 1 is done.
    const bool ordered = op.op == Op::issue_stage2 && stage1_ordered_;
    stage1_ordered_ = false;
    if (!ordered) {
      DMUON_CHECK_CUDA(cudaEventRecord(produced_, compute_));
      DMUON_CHECK_CUDA(cudaStreamWaitEvent(s, produced_, 0));
    }
    comm(op.comm)->set_stream(s);
  }
  void wait(comm::Batch& batch) override { batch.wait_on_stream(compute_); }
  void order_after(comm::Batch& batch, CommGroup) override {
    stage1_ordered_ = batch.pending();
    batch.wait_on_stream(replicate_, /*consume=*/false);
  }

  void begin_step(long) override { cu::zero_counters(*ctx_, counters_->data(), counters_->size()); }

  void pack(const StepOp& op) override {
    // One conversion kernel per copy: per packed buffer (the masters are stored packed per
    // pair), per FSDP shard, per replica.
    for (const PackCopy& c : pack_copies(L_, op))
      cu::convert(*ctx_, master_.at(c.master), Dtype::f32, at(Location{c.to, c.weight}), c.dtype,
                  static_cast<std::size_t>(c.count));
  }

  void weights_arrived(const StepOp&) override {}  // compute reads the wire type directly

  void forward(const StepOp& op, long step) override {
    const auto& p = param(op.param);
    auto& a = acts_[static_cast<std::size_t>(op.param)];
    if (step_.accum > 1) a.range = micro_range(p, a.range.n, op.micro);
    const std::int64_t b = a.range.local();
    if (step_.compute_of(p.pid) == Compute::none || b == 0 || p.shape.cols == 0) return;
    const Dtype type = p.wire;
    cu::synthetic_rows(*ctx_, a.x.at(0), type, static_cast<std::size_t>(b),
                       static_cast<std::size_t>(p.shape.cols), seed_,
                       static_cast<std::uint64_t>(step), static_cast<std::uint64_t>(a.range.begin),
                       data_key(p), synthetic_stream::x);
    // Y = X·Wᵀ
    cu::gemm(*ctx_, type, false, true, static_cast<std::size_t>(b),
             static_cast<std::size_t>(p.shape.rows), static_cast<std::size_t>(p.shape.cols), 1.0f,
             a.x.at(0), weights_of(op.param, op.weight_base), 0.0f, a.y.at(0));
  }

  void backward(const StepOp& op, long step) override {
    const auto& p = param(op.param);
    auto& a = acts_[static_cast<std::size_t>(op.param)];
    void* grad = grad_of(op.param, op.grad_base);
    const void* w = weights_of(op.param, op.weight_base);
    const Dtype type = p.wire, grad_type = p.grad_wire;  // compute; the gradient's wire
    const auto rows = static_cast<std::size_t>(p.shape.rows),
               cols = static_cast<std::size_t>(p.shape.cols);
    if (step_.accum > 1) a.range = micro_range(p, a.range.n, op.micro);
    const std::int64_t b = a.range.local();
    if (step_.compute_of(p.pid) == Compute::none) {
      // --accum K: each micro-step adds (u + w)/K (the loss averaged over the whole batch).
      cu::synthetic_grad_none(*ctx_, w, type, grad, grad_type, static_cast<std::size_t>(p.numel),
                              seed_, static_cast<std::uint64_t>(step), data_key(p),
                              synthetic_stream::none, 1.0f / static_cast<float>(step_.accum),
                              op.accumulate);
    } else if (b == 0 || p.numel == 0) {
      // An empty micro-batch adds nothing to what earlier micro-steps left.
      if (!op.accumulate)
        DMUON_CHECK_CUDA(cudaMemsetAsync(grad, 0, bytes_of(grad_type, p.numel), compute_));
    } else {
      const auto ub = static_cast<std::size_t>(b);
      cu::synthetic_rows(
          *ctx_, target_.at(0), type, ub, rows, seed_, static_cast<std::uint64_t>(step),
          static_cast<std::uint64_t>(a.range.begin), data_key(p), synthetic_stream::target);
      // dY = (Y − T)·G/n (the mean over the global samples, see synthetic.hpp)
      const float scale = static_cast<float>(p.data_ranks) / static_cast<float>(a.range.n);
      cu::residual_scale(*ctx_, a.y.at(0), target_.at(0), type, ub * rows, scale);
      // dX = dY·W, then dW (+)= dYᵀ·X in the gradient's type.
      cu::gemm(*ctx_, type, false, false, ub, cols, rows, 1.0f, a.y.at(0), w, 0.0f, dx_.at(0));
      weight_gradient(p, a, ub, grad, op.accumulate);
    }
    if (p.padding() > 0) {
      // The pooled slot held another group's gradient: the padding must reduce as zeros
      // (sharded_adamw: its persistent full gradient in the grad arena).
      const auto loc = gradient_location(L_, op.param, op.grad_base);
      DMUON_CHECK_CUDA(cudaMemsetAsync(at(Location{loc.arena, loc.offset + p.numel}), 0,
                                       bytes_of(grad_type, p.padding()), compute_));
    }
  }

  void poison_gradient(const StepOp& op) override {
    cu::convert(*ctx_, nan_.at(0), Dtype::f32, grad_of(op.param, op.grad_base),
                param(op.param).grad_wire, 1);
  }

  void release_weights(const StepOp&) override {}  // stream order covers the slot's reuse

  void prepare(const StepOp& op, long step) override {
    for (int pi : group(op.group).members) {
      const auto& p = param(pi);
      if (!p.updated_here || !p.muon) continue;
      const Dtype type = p.grad_wire;
      if (p.storage == Storage::sharded) {
        // The Nesterov input shard goes to its own place in the gather slot (in-place gather),
        // which travels in the weights' type.
        const Location gather = gather_location(pi, op.gather_base);
        cu::muon_momentum(*ctx_, consumed_gradient(p), type, state_.f32(p.state_offset),
                          at(Location{gather.arena, gather.offset + p.shard_begin}), p.wire,
                          static_cast<std::size_t>(p.chunk), step, muon_.momentum, muon_.nesterov,
                          bad_gradient(pi));
      } else {
        cu::muon_momentum(*ctx_, consumed_gradient(p), type, state_.f32(p.state_offset),
                          ns_input_.at(p.state_offset), ns_type_, static_cast<std::size_t>(p.numel),
                          step, muon_.momentum, muon_.nesterov, bad_gradient(pi));
      }
    }
  }

  void newton_schulz(const StepOp& op) override {
    const auto& p = param(op.param);
    // --tp, on the parameter's TP owner after tp_assemble: the logical matrix.
    const bool tp = p.tp_sharded();
    void* x = tp ? tp_matrix_.at(0) : ns_matrix(op.param, op.gather_base, true);
    const MatrixShape shape = tp ? p.logical : p.shape;
    const auto rows = static_cast<std::size_t>(shape.rows),
               cols = static_cast<std::size_t>(shape.cols);
    cu::newton_schulz(*ctx_, x, x, rows, cols, ns_type_, muon_.ns, workspace(rows, cols),
                      bad_gradient(op.param));
  }

  // The TP exchange (docs/METRICS.md "Tensor parallelism"), as the host runs it: the shard of
  // the Nesterov input goes on the gather's wire; the owner assembles the logical matrix in
  // the NS type, orthogonalizes it (newton_schulz) and cuts it into the fp32 shards the
  // scatter sends.
  void tp_stage(const StepOp& op) override {
    const auto& p = param(op.param);
    cu::convert(*ctx_, ns_input_.at(p.state_offset), ns_type_, tp_send_.at(0), wire_,
                static_cast<std::size_t>(p.numel));
  }

  void tp_assemble(const StepOp& op) override {
    const auto& p = param(op.param);
    const auto n = static_cast<std::size_t>(L_.tp() * p.numel);
    cu::convert(*ctx_, tp_recv_.at(0), wire_, tp_blocks_.at(0), ns_type_, n);
    copy_blocks(tp_block_copies(p.logical.rows, p.logical.cols, p.tp_dim, L_.tp(),
                                dtype_bytes(ns_type_), /*assemble=*/true),
                tp_blocks_.at(0), tp_matrix_.at(0));
  }

  void tp_split(const StepOp& op) override {
    const auto& p = param(op.param);
    copy_blocks(tp_block_copies(p.logical.rows, p.logical.cols, p.tp_dim, L_.tp(),
                                dtype_bytes(ns_type_), /*assemble=*/false),
                tp_matrix_.at(0), tp_blocks_.at(0));
    cu::convert(*ctx_, tp_blocks_.at(0), ns_type_,
                at(locate(L_, BufferRef{BufferRef::Kind::tp_shards, -1, op.param, 0})), Dtype::f32,
                static_cast<std::size_t>(L_.tp() * p.numel));
  }

  void apply(const StepOp& op, long step) override {
    const auto& p = param(op.param);
    if (p.muon && p.tp_sharded()) {
      // This rank's shard of the scattered update, with the logical matrix's Muon scale.
      const float scale = kernels::muon_scale(static_cast<std::size_t>(p.logical.rows),
                                              static_cast<std::size_t>(p.logical.cols));
      cu::muon_apply(*ctx_, master_.f32(p.master_offset), tp_update_.at(p.state_offset), Dtype::f32,
                     static_cast<std::size_t>(p.numel), muon_.lr, muon_.weight_decay, scale,
                     bad_weight(op.param));
      return;
    }
    if (p.muon) {
      const float scale = kernels::muon_scale(static_cast<std::size_t>(p.shape.rows),
                                              static_cast<std::size_t>(p.shape.cols));
      const std::int64_t begin = p.sharded() ? p.shard_begin : 0, len = p.shard_len();
      const auto* out =
          static_cast<const unsigned char*>(ns_matrix(op.param, op.gather_base, false)) +
          static_cast<std::size_t>(begin) * dtype_bytes(ns_type_);
      cu::muon_apply(*ctx_, master_.f32(p.master_offset), out, ns_type_,
                     static_cast<std::size_t>(len), muon_.lr, muon_.weight_decay, scale,
                     bad_weight(op.param));
      return;
    }
    cu::adamw_step(*ctx_, master_.f32(p.master_offset), consumed_gradient(p), p.grad_wire,
                   state_.f32(p.state_offset), state2_.f32(p.second_state_offset),
                   static_cast<std::size_t>(p.state_elems), step, adamw_config(),
                   bad_gradient(op.param));
  }

  void clip_partial(const StepOp&) override {
    const bool inf = step_.clip_norm_type == ClipNormType::inf;
    cu::clip_partial_reset(*ctx_, clip_partial_acc());
    for (const auto& p : L_.params) {
      if (!p.updated_here) continue;
      const ClipSpan span = clip_counted(L_, p);
      if (span.count == 0) continue;
      const auto* g = static_cast<const unsigned char*>(consumed_gradient(p)) +
                      bytes_of(p.grad_wire, span.begin);
      cu::clip_partial_add(*ctx_, g, p.grad_wire, static_cast<std::size_t>(span.count), inf,
                           clip_partial_acc());
    }
    cu::clip_partial_finish(*ctx_, clip_partial_acc(), inf, clip_scalar_.f32());
  }

  void clip_scale(const StepOp&) override {
    // The coefficient is computed by each kernel from the reduced scalar on the device: the
    // host never waits for the norm.
    const bool inf = step_.clip_norm_type == ClipNormType::inf;
    for (const auto& p : L_.params) {
      if (!p.updated_here) continue;
      const std::int64_t n = p.own_elems();
      cu::clip_scale(*ctx_, consumed_gradient(p), p.grad_wire, static_cast<std::size_t>(n),
                     clip_scalar_.f32(), inf, step_.clip_norm);
    }
  }

  void end_step(long step) override {
    // Join the weight and reduce streams (the replicate broadcasts stay in flight by design:
    // the next forward waits for them), then one host synchronisation for the whole step.
    for (cudaStream_t s : {weights_, reduce_}) {
      DMUON_CHECK_CUDA(cudaEventRecord(joined_, s));
      DMUON_CHECK_CUDA(cudaStreamWaitEvent(compute_, joined_, 0));
    }
    timer_->stop_step();
    host_wait(compute_);
    cu::read_counters(*ctx_, counters_->data(), counters_->size(), host_counters_.data());
    for (std::size_t i = 0; i < L_.params.size() && nonfinite_.empty(); ++i) {
      if (host_counters_[2 * i] != 0)
        nonfinite_ = fmt::format("non-finite gradient in parameter '{}' at step {}",
                                 L_.params[i].name, step);
      else if (host_counters_[2 * i + 1] != 0)
        nonfinite_ =
            fmt::format("non-finite weight in parameter '{}' at step {}", L_.params[i].name, step);
    }
  }

  std::string take_nonfinite() override { return std::exchange(nonfinite_, std::string()); }

  PhaseTimer& timer() override { return *timer_; }
  TraceClock* trace_clock() override {
    if (!trace_clock_) {
      std::array<cudaStream_t, kStreamCount> streams{};
      for (int i = 0; i < kStreamCount; ++i)
        streams[static_cast<std::size_t>(i)] = stream(static_cast<Stream>(i));
      trace_clock_ = std::make_unique<CudaTraceClock>(compute_, streams);
    }
    return trace_clock_.get();
  }

  void read_masters(std::int64_t offset, std::int64_t count, float* host) override {
    host_wait(compute_);
    DMUON_CHECK_CUDA(cudaMemcpy(host, master_.f32(offset), static_cast<std::size_t>(count) * 4,
                                cudaMemcpyDeviceToHost));
  }

  std::int64_t allocated_bytes() const override {
    std::size_t b = 0;
    for (const DeviceBuffer* d :
         {&master_,        &state_,       &state2_,    &ns_input_,    &grad_arena_,  &weight_pool_,
          &grad_pool_,     &gather_pool_, &gather_ns_, &alt_weights_, &alt_grads_,   &alt_gather_,
          &alt_gather_ns_, &target_,      &dx_,        &grad_f32_,    &clip_scalar_, &clip_acc_,
          &tp_send_,       &tp_recv_,     &tp_matrix_, &tp_blocks_,   &tp_update_})
      b += d->bytes();
    for (const auto& a : acts_) b += a.x.bytes() + a.y.bytes();
    for (const auto& w : workspaces_) b += w.second->bytes();
    return static_cast<std::int64_t>(b + act_scratch_.bytes());
  }

  // The activation work of one unit (activation_work.hpp), run for its cost in the wire type
  // on the compute stream, outputs read by nothing: GEMMs (recomputed linears, the attention
  // core unfused as on the host: there is no fused attention kernel here) through cu::gemm,
  // one product per batch member; a memory-bound op as one device copy of max(read, written)
  // bytes (at least its traffic: the backend has no kernel per elementwise op).
  void activation(const StepOp& op) override {
    const auto& ops = unit_ops(*L_.activation, op);
    const int e = static_cast<int>(dtype_bytes(wire_));
    for (const auto& o : ops)
      for (const auto& u : unfused_ops(o, e)) {
        if (u.kind == work::OpKind::ep_collective) {
          exchange_tokens(u);
          continue;
        }
        if (work::is_collective(u.kind))  // TP and CP work is the projection's only
          throw std::logic_error(
              "cuda activation: a TP or CP collective op is not run by the engine");
        if (u.kind == work::OpKind::memory) {
          const auto n =
              static_cast<std::size_t>(std::ceil(std::max(u.bytes_read, u.bytes_written) / e));
          cu::convert(*ctx_, act_scratch_.at(0), wire_, act_scratch_.at(act_half_), wire_, n);
          continue;
        }
        const auto m = static_cast<std::size_t>(u.gemm.m), n = static_cast<std::size_t>(u.gemm.n),
                   k = static_cast<std::size_t>(u.gemm.k);
        if (m == 0 || n == 0 || k == 0) continue;
        const auto mk = static_cast<std::int64_t>(m * k), kn = static_cast<std::int64_t>(k * n);
        for (std::int64_t i = 0; i < u.gemm.batch; ++i)
          cu::gemm(*ctx_, wire_, false, false, m, n, k, 1.0f, act_scratch_.at(0),
                   act_scratch_.at(mk), 0.0f, act_scratch_.at(mk + kn));
      }
  }

 private:
  // An EP op's all-to-all (token_exchange) over the EP group on the compute stream, from the
  // scratch's first half into its second; the stream, not the host, waits for it.
  void exchange_tokens(const work::Op& op) {
    const TokenExchange x = token_exchange(op, ep_ ? ep_->size() : 0);
    ep_->group_start();
    ep_->all_to_all(act_scratch_.at(0), act_scratch_.at(act_half_), x.chunk, x.dtype);
    ep_->group_end().wait_on_stream(compute_);
  }

  struct Activations {
    SampleRange range;
    DeviceBuffer x, y;
  };

  // The compute stream and the three communication streams (reduce at the higher priority),
  // their events, the kernels' context and the phase timer.
  void create_streams() {
    int least = 0, greatest = 0;
    DMUON_CHECK_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    DMUON_CHECK_CUDA(cudaStreamCreateWithPriority(&compute_, cudaStreamNonBlocking, least));
    DMUON_CHECK_CUDA(cudaStreamCreateWithPriority(&weights_, cudaStreamNonBlocking, least));
    DMUON_CHECK_CUDA(cudaStreamCreateWithPriority(&reduce_, cudaStreamNonBlocking, greatest));
    DMUON_CHECK_CUDA(cudaStreamCreateWithPriority(&replicate_, cudaStreamNonBlocking, least));
    DMUON_CHECK_CUDA(cudaEventCreateWithFlags(&produced_, cudaEventDisableTiming));
    DMUON_CHECK_CUDA(cudaEventCreateWithFlags(&joined_, cudaEventDisableTiming));
    ctx_ = std::make_unique<cu::Context>(compute_);
    timer_ = std::make_unique<CudaPhaseTimer>(compute_);
  }

  // NCCL communicators: the shard group, HSDP's replicate group, the world for --clip-norm and
  // the TP group; every one tracked for an abort.
  void create_communicators(const comm::RankGroups& groups, const EngineOptions& o) {
    comm::CommunicatorOptions co;
    co.cuda_device = device_;
    shard_ = comm::make_communicator(comm::Backend::nccl, groups.comm(CommGroup::shard), co);
    if (L_.hsdp())
      replicate_comm_ =
          comm::make_communicator(comm::Backend::nccl, groups.comm(CommGroup::replicate), co);
    if (L_.me.grid.has_expert_groups())
      expert_ = comm::make_communicator(comm::Backend::nccl, groups.comm(CommGroup::expert), co);
    if (o.step.clip()) {
      // --clip-norm: the norm's one-scalar all-reduce spans the world.
      world_ = comm::make_communicator(comm::Backend::nccl, groups.comm(CommGroup::world), co);
      clip_scalar_ = DeviceBuffer(1, Dtype::f32);
      static_assert(sizeof(cu::ClipPartial) <= 4 * sizeof(float));
      clip_acc_ = DeviceBuffer(4, Dtype::f32);
    }
    if (L_.tp() > 1) allocate_tp(groups, co);
    if (L_.me.grid.ep > 1 && L_.activation) {
      // The routed tokens' all-to-alls run on the compute stream, between the activation
      // kernels that produce and consume them.
      ep_ = comm::make_communicator(comm::Backend::nccl, groups.comm(CommGroup::ep), co);
      ep_->set_stream(compute_);
    }
    for (comm::Communicator* c :
         {shard_.get(), replicate_comm_.get(), world_.get(), tp_.get(), expert_.get(), ep_.get()})
      teardown_.track(c);
  }

  // Masters, optimizer state and the communication arenas (step_layout.hpp).
  void allocate_arenas() {
    master_ = DeviceBuffer(L_.master_elems, Dtype::f32);
    state_ = DeviceBuffer(L_.state_elems, Dtype::f32);
    state2_ = DeviceBuffer(L_.second_state_elems, Dtype::f32);
    // AdamW reads its moments at step 1 (Muon overwrites its momentum then): start them at 0.
    for (const DeviceBuffer* b : {&state_, &state2_})
      if (b->bytes() > 0) DMUON_CHECK_CUDA(cudaMemset(b->at(0), 0, b->bytes()));
    ns_input_ = DeviceBuffer(L_.state_elems, ns_type_);
    grad_arena_ = DeviceBuffer(L_.grad_arena_elems, reduce_type_);
    weight_pool_ = DeviceBuffer(L_.weight_pool_elems, wire_);
    grad_pool_ = DeviceBuffer(L_.grad_pool_elems, reduce_type_);
    gather_pool_ = DeviceBuffer(L_.gather_pool_elems, wire_);
    if (wire_ != ns_type_) gather_ns_ = DeviceBuffer(L_.gather_pool_elems, ns_type_);
    // --route dtypes: the parameters travelling in the other type (step_layout.hpp), each in
    // its own region of three arenas of that type; fsdp-muon's Newton–Schulz image of their
    // gathers when it is not the NS type.
    alt_weights_ = DeviceBuffer(L_.alt_weight_elems, L_.alt_wire);
    alt_grads_ = DeviceBuffer(L_.alt_grad_elems, L_.alt_reduce);
    alt_gather_ = DeviceBuffer(L_.alt_gather_elems, L_.alt_wire);
    if (L_.alt_wire != ns_type_) alt_gather_ns_ = DeviceBuffer(L_.alt_gather_elems, ns_type_);
  }

  // Counters, the NaN source and the activation scratch; returns the per-call scratch's type.
  Dtype allocate_scratch() {
    // Shared compute scratch holds any parameter's type: the wider of the two.
    const bool alt = L_.alt_weight_elems + L_.alt_grad_elems + L_.alt_gather_elems > 0;
    const Dtype scratch_type =
        alt && dtype_bytes(L_.alt_wire) > dtype_bytes(wire_) ? L_.alt_wire : wire_;
    counters_ = std::make_unique<cu::DeviceCounters>(2 * L_.params.size());
    host_counters_.assign(2 * L_.params.size(), 0);
    nan_ = DeviceBuffer(1, Dtype::f32);
    if (L_.activation) {
      // One scratch for every activation op: a GEMM's operands side by side, a memory op's
      // source and destination halves (kMaxActivationScratch bytes at most per half).
      act_half_ = static_cast<std::int64_t>(activation_scratch_elems(
          *L_.activation, static_cast<int>(dtype_bytes(wire_)), kMaxActivationScratch));
      act_scratch_ = DeviceBuffer(2 * act_half_, wire_);
      if (act_half_ > 0) DMUON_CHECK_CUDA(cudaMemset(act_scratch_.at(0), 0, act_scratch_.bytes()));
    }
    const float nan = std::numeric_limits<float>::quiet_NaN();
    DMUON_CHECK_CUDA(cudaMemcpy(nan_.at(0), &nan, sizeof(float), cudaMemcpyHostToDevice));
    return scratch_type;
  }

  // Each parameter's activation buffers and its initial master weights (its shard under FSDP).
  void place_parameters(const model::ModuleTree& tree, const EngineOptions& o, Dtype scratch_type) {
    // Activations: X and Y of every parameter live from its forward to its backward, as a
    // network's do; the target and dX are regenerated / discarded per call (shared scratch).
    const std::int64_t global = o.step.global_samples(L_.me.grid.dp_size());
    std::int64_t scratch_rows = 0, scratch_cols = 0;
    std::vector<float> init;
    for (const auto& p : L_.params) {
      Activations a;
      a.range = sample_range(tree, p.pid, global, p.data_rank, p.data_ranks);
      // --accum: buffers for the largest micro-batch; forward/backward take their micro's range.
      std::int64_t most = a.range.local();
      if (step_.accum > 1) {
        most = 0;
        for (int j = 0; j < step_.accum; ++j)
          most = std::max(most, micro_range(p, a.range.n, j).local());
      }
      const std::int64_t b = step_.compute_of(p.pid) == Compute::gemm ? most : 0;
      a.x = DeviceBuffer(b * p.shape.cols, p.wire);
      a.y = DeviceBuffer(b * p.shape.rows, p.wire);
      scratch_rows = std::max(scratch_rows, b * p.shape.rows);
      scratch_cols = std::max(scratch_cols, b * p.shape.cols);
      acts_.push_back(std::move(a));
      if (p.master_offset < 0) continue;
      init.assign(static_cast<std::size_t>(p.numel), 0.0f);
      init_weights(seed_, data_key(p), init.data(), p.numel, p.shape.cols);
      const float* src = init.data();
      std::int64_t count = p.numel;
      std::vector<float> shard;
      if (p.sharded()) {
        shard.assign(static_cast<std::size_t>(p.chunk), 0.0f);
        for (std::int64_t j = 0; j < p.shard_len(); ++j)
          shard[static_cast<std::size_t>(j)] = init[static_cast<std::size_t>(p.shard_begin + j)];
        src = shard.data();
        count = p.chunk;
      }
      DMUON_CHECK_CUDA(cudaMemcpy(master_.f32(p.master_offset), src,
                                  static_cast<std::size_t>(count) * sizeof(float),
                                  cudaMemcpyHostToDevice));
    }
    target_ = DeviceBuffer(scratch_rows, scratch_type);
    dx_ = DeviceBuffer(scratch_cols, scratch_type);
    grad_f32_ = DeviceBuffer(staged_grad_elems(L_), Dtype::f32);
  }

  // Newton–Schulz workspaces now: creating one synchronises, which a step must not do.
  void create_ns_workspaces() {
    for (const auto& p : L_.params)
      if (p.updated_here && p.muon) {
        const MatrixShape s = tp_owner_of(p) ? p.logical : p.shape;  // --tp: the whole matrix
        (void)workspace(static_cast<std::size_t>(s.rows), static_cast<std::size_t>(s.cols));
      }
  }

  // --tp: the exchange's communicator and buffers (step_layout.hpp "TP exchange").
  void allocate_tp(const comm::RankGroups& groups, const comm::CommunicatorOptions& co) {
    tp_ = comm::make_communicator(comm::Backend::nccl, groups.comm(CommGroup::tp), co);
    tp_send_ = DeviceBuffer(L_.tp_send_elems(), wire_);
    tp_recv_ = DeviceBuffer(L_.tp_recv_elems(), wire_);
    tp_matrix_ = DeviceBuffer(L_.tp_matrix_elems(), Dtype::f32);
    tp_blocks_ = DeviceBuffer(L_.tp_recv_elems(), ns_type_);
    std::int64_t updates = 0;
    for (const auto& p : L_.params)
      if (p.tp_sharded() && p.updated_here && p.muon)
        updates = std::max(updates, p.state_offset + p.numel);
    tp_update_ = DeviceBuffer(updates, Dtype::f32);
  }

  // The synthetic-data key (ParamLayout::data_key): a TP shard is its own Linear of the local
  // shape, an EP expert keyed by its name in the full model (synthetic.hpp).
  static std::uint64_t data_key(const ParamLayout& p) { return p.data_key; }
  // Whether this rank orthogonalizes `p`'s logical matrix (its TP owner, --tp).
  bool tp_owner_of(const ParamLayout& p) const {
    return p.tp_sharded() && p.tp_owner == L_.tp_rank();
  }

  // Block copies (tp_block_copies.hpp) from `src` to `dst` on the compute stream.
  void copy_blocks(const std::vector<BlockCopy2D>& copies, const void* src, void* dst) {
    for (const auto& c : copies)
      DMUON_CHECK_CUDA(
          cudaMemcpy2DAsync(static_cast<unsigned char*>(dst) + c.dst_offset, c.dst_pitch,
                            static_cast<const unsigned char*>(src) + c.src_offset, c.src_pitch,
                            c.width, c.height, cudaMemcpyDeviceToDevice, compute_));
  }

  // The fp32 staging weight_gradient needs: the largest gradient of a 16-bit type other than
  // its weights' (fp32 gradients take the GEMM's output directly).
  static std::int64_t staged_grad_elems(const StepLayout& L) {
    std::int64_t n = 0;
    for (const auto& p : L.params)
      if (p.grad_wire != p.wire && p.grad_wire != Dtype::f32) n = std::max(n, p.numel);
    return n;
  }

  // dW (+)= dYᵀ·X of a batch of b samples, read in the weights' type. A gradient in another type
  // (--reduce-dtype) takes an fp32 c: directly when it is fp32 (cuBLAS accumulates into it),
  // else staged in fp32 and rounded once into it, as the host does.
  void weight_gradient(const ParamLayout& p, const Activations& a, std::size_t b, void* grad,
                       bool accumulate) {
    const auto rows = static_cast<std::size_t>(p.shape.rows),
               cols = static_cast<std::size_t>(p.shape.cols), n = rows * cols;
    const float beta = accumulate ? 1.0f : 0.0f;
    if (p.grad_wire == p.wire || p.grad_wire == Dtype::f32) {
      cu::gemm(*ctx_, p.wire, p.grad_wire, true, false, rows, cols, b, 1.0f, a.y.at(0), a.x.at(0),
               beta, grad);
      return;
    }
    void* staged = grad_f32_.at(0);
    if (accumulate) cu::convert(*ctx_, grad, p.grad_wire, staged, Dtype::f32, n);
    cu::gemm(*ctx_, p.wire, Dtype::f32, true, false, rows, cols, b, 1.0f, a.y.at(0), a.x.at(0),
             beta, staged);
    cu::convert(*ctx_, staged, Dtype::f32, grad, p.grad_wire, n);
  }

  // This rank's samples in micro-step `micro` of --accum (accumulation.hpp).
  SampleRange micro_range(const ParamLayout& p, std::int64_t n, int micro) const {
    return micro_sample_range(n, micro, step_.accum, p.data_rank, p.data_ranks);
  }
  const GroupLayout& group(int g) const { return L_.groups[static_cast<std::size_t>(g)]; }
  const ParamLayout& param(int p) const { return L_.params[static_cast<std::size_t>(p)]; }
  static std::size_t bytes_of(Dtype type, std::int64_t n) {
    return static_cast<std::size_t>(n) * dtype_bytes(type);
  }
  unsigned long long* bad_gradient(int p) const {
    return counters_->at(2 * static_cast<std::size_t>(p));
  }
  unsigned long long* bad_weight(int p) const {
    return counters_->at(2 * static_cast<std::size_t>(p) + 1);
  }

  void* at(const Location& where) const {
    switch (where.arena) {
      case Arena::master: return master_.at(where.offset);
      case Arena::grad_arena: return grad_arena_.at(where.offset);
      case Arena::weight_pool: return weight_pool_.at(where.offset);
      case Arena::grad_pool: return grad_pool_.at(where.offset);
      case Arena::gather_pool: return gather_pool_.at(where.offset);
      case Arena::clip_scalar: return clip_scalar_.at(0);
      case Arena::alt_weights: return alt_weights_.at(where.offset);
      case Arena::alt_grads: return alt_grads_.at(where.offset);
      case Arena::alt_gather: return alt_gather_.at(where.offset);
      case Arena::tp_send: return tp_send_.at(where.offset);
      case Arena::tp_recv: return tp_recv_.at(where.offset);
      case Arena::tp_matrix: return tp_matrix_.at(where.offset);
      // The TP scatter's destination: each TP-sharded parameter's fp32 update shard.
      case Arena::ns_input: return tp_update_.at(where.offset);
      default: break;
    }
    throw std::logic_error("CUDA backend: a buffer in an arena it does not have");
  }
  cu::ClipPartial* clip_partial_acc() const {
    return static_cast<cu::ClipPartial*>(clip_acc_.at(0));
  }
  // The gradient the optimizer reads: the owner's reduced one, the shard, the replica.
  void* consumed_gradient(const ParamLayout& p) const {
    return at(Location{p.alt_grad ? Arena::alt_grads : Arena::grad_arena,
                       p.storage == Storage::sharded ? p.grad_shard_offset : p.grad_offset});
  }
  void* grad_of(int param, std::int64_t base) const {
    return at(gradient_location(L_, param, base));
  }
  // The weights compute reads (its group's slot, or its own alt region).
  void* weights_of(int param, std::int64_t weight_base) const {
    return at(locate(L_, BufferRef{BufferRef::Kind::weights, -1, param, weight_base}));
  }
  // fsdp-muon: a Muon parameter's all-gathered Nesterov input.
  Location gather_location(int param, std::int64_t gather_base) const {
    return locate(L_, BufferRef{BufferRef::Kind::gather, -1, param, gather_base});
  }

  // The CUDA stream of the op table's communication stream (step_op.hpp).
  cudaStream_t stream(Stream s) const {
    switch (s) {
      case Stream::reduce: return reduce_;
      case Stream::replicate: return replicate_;
      case Stream::weights: return weights_;
    }
    return weights_;
  }

  // The ns-typed matrix Newton–Schulz works on in place: owners' and replicas' inputs, or
  // fsdp-muon's gathered input (converted from its wire type when `load` and types differ).
  void* ns_matrix(int pi, std::int64_t gather_base, bool load) {
    const ParamLayout& p = param(pi);
    if (p.storage != Storage::sharded) return ns_input_.at(p.state_offset);
    const Location where = gather_location(pi, gather_base);
    void* gathered = at(where);
    const Dtype type = p.wire;  // the gather travels in the weights' type
    if (type == ns_type_) return gathered;
    void* image = (p.alt_wire ? alt_gather_ns_ : gather_ns_).at(where.offset);
    if (load)
      cu::convert(*ctx_, gathered, type, image, ns_type_, static_cast<std::size_t>(p.numel));
    return image;
  }

  cu::NsWorkspace& workspace(std::size_t rows, std::size_t cols) {
    auto& w = workspaces_[{rows, cols}];
    if (!w) w = std::make_unique<cu::NsWorkspace>(rows, cols, ns_type_);
    return *w;
  }

  // Host wait for everything enqueued on `s` so far, polling the communicators' asynchronous
  // errors (a dead peer leaves NCCL kernels spinning forever) with the NCCL timeout.
  void host_wait(cudaStream_t s) {
    DMUON_CHECK_CUDA(cudaEventRecord(joined_, s));
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
      const cudaError_t rc = cudaEventQuery(joined_);
      if (rc == cudaSuccess) return;
      if (rc != cudaErrorNotReady) DMUON_CHECK_CUDA(rc);
      for (comm::Communicator* c :
           {shard_.get(), replicate_comm_.get(), world_.get(), tp_.get(), expert_.get(), ep_.get()})
        if (c) c->check_async_error();
      const double waited =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (waited > timeout_s()) {
        teardown_.abort();
        comm::abort_all(
            fmt::format("the step did not finish on the GPU within {:.0f} s "
                        "(DMUON_NCCL_TIMEOUT_S): a peer is gone or hung",
                        timeout_s()));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  static double timeout_s() {
    const char* v = std::getenv("DMUON_NCCL_TIMEOUT_S");
    const double t = v ? std::atof(v) : 0.0;
    return t > 0 ? t : 600.0;
  }

  const StepLayout& L_;
  StepSpec step_;       // what the step computes (its batch, compute mode, clip, accum)
  std::uint64_t seed_;  // the synthetic data's
  Dtype wire_, reduce_type_, ns_type_;  // weights, gradients (StepLayout::reduce), Newton–Schulz
  kernels::MuonConfig muon_;
  int device_;
  cudaStream_t compute_ = nullptr, weights_ = nullptr, reduce_ = nullptr, replicate_ = nullptr;
  cudaEvent_t produced_ = nullptr, joined_ = nullptr;
  bool stage1_ordered_ = false;  // order_after() just ordered the next issue after a batch
  std::unique_ptr<cu::Context> ctx_;
  std::unique_ptr<CudaPhaseTimer> timer_;
  std::unique_ptr<CudaTraceClock> trace_clock_;  // --trace only
  std::unique_ptr<comm::Communicator> shard_, replicate_comm_, world_, expert_, ep_;
  // Aborts those before anything synchronises on the error path; else synchronises at the end.
  DeviceTeardown teardown_{[this] { cudaDeviceSynchronize(); }};
  DeviceBuffer act_scratch_;   // the activation work's operands (activation())
  std::int64_t act_half_ = 0;  // elements of one half of act_scratch_
  DeviceBuffer master_, state_, state2_, ns_input_, grad_arena_, weight_pool_, grad_pool_,
      gather_pool_, gather_ns_, alt_weights_, alt_grads_, alt_gather_, alt_gather_ns_, target_, dx_,
      nan_, clip_scalar_, clip_acc_;
  DeviceBuffer grad_f32_;  // dW staged in fp32 for a 16-bit gradient of another type
  // --tp (step_layout.hpp "TP exchange"): the shard on the gather's wire; on a TP owner the
  // gathered shards, the fp32 matrix arena (the logical matrix in the NS type in its first
  // half, the fp32 shards the scatter sends in its second), the shards in the NS type
  // between the two; and every TP-sharded parameter's fp32 update shard (the scatter's).
  std::unique_ptr<comm::Communicator> tp_;
  DeviceBuffer tp_send_, tp_recv_, tp_matrix_, tp_blocks_, tp_update_;
  std::vector<Activations> acts_;
  std::unique_ptr<cu::DeviceCounters> counters_;
  std::vector<unsigned long long> host_counters_;
  std::string nonfinite_;  // the step's first non-finite gradient or weight (end_step)
  std::map<std::pair<std::size_t, std::size_t>, std::unique_ptr<cu::NsWorkspace>> workspaces_;
};

}  // namespace

std::unique_ptr<StepBackend> make_cuda_backend(const model::ModuleTree& tree,
                                               const StepLayout& layout, const EngineOptions& o,
                                               const comm::RankGroups& groups) {
  const int device = select_device(groups.comm(CommGroup::world));
  return std::make_unique<CudaBackend>(tree, layout, o, groups, device);
}

}  // namespace dmuon::engine
