#pragma once
// What an executor needs from a machine to run a step schedule: communicators, the memory the
// layout describes, the compute kernels, waits and timers. Two implementations: the host one
// (Open MPI + Kokkos, host_backend.hpp) and the CUDA one (NCCL + cuBLAS + streams,
// cuda_backend.hpp). Every decision about WHAT happens lives in the layout and the schedule;
// a backend only decides HOW on its machine.
//
// Ordering model (the CUDA backend's streams; the host backend is trivially ordered):
//   compute queue   pack, forward, backward, prepare, newton_schulz, apply run in schedule order
//   issue           before_issue(op) orders the collective after the compute queue so far
//   wait(batch)     the compute queue (and whatever the host reads) sees the batch's results
//   order_after     the next issue on `group` starts after `batch` (stage 2 after stage 1),
//                   without making the compute queue wait

#include <array>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <vector>

#include "dmuon/comm/batch.hpp"
#include "dmuon/comm/communicator.hpp"
#include "dmuon/engine/step/run_result.hpp"
#include "dmuon/engine/step/step_schedule.hpp"

namespace dmuon::engine {

class TraceClock;

/// Per-phase step time. Time is attributed by segments: switch_to() starts a segment that
/// lasts until the next switch_to()/pause(). Host: a steady clock; CUDA: events on the compute
/// stream (a comm segment there is the time the compute stream stalled on communication).
class PhaseTimer {
 public:
  virtual ~PhaseTimer() = default;
  virtual void start_step() = 0;
  virtual void switch_to(Phase phase, bool exposed) = 0;
  virtual void pause() = 0;
  /// Milliseconds per phase for the step just ended; Phase::step is the whole step and
  /// Phase::exposed_comm the sum of the exposed segments. Called after StepBackend::end_step.
  virtual std::array<double, kPhaseCount> finish_step() = 0;
};

class StepBackend {
 public:
  virtual ~StepBackend() = default;

  /// The communicator of a group (ddp: `shard` spans the world); null if the group does not
  /// exist here (no replicate group without HSDP).
  virtual comm::Communicator* comm(CommGroup group) = 0;
  /// Memory of a collective's buffer.
  virtual void* buffer(const BufferRef& ref) = 0;
  /// Orders the collectives of issue op `op` (on op.comm) after what they read.
  virtual void before_issue(const StepOp& op) = 0;
  virtual void wait(comm::Batch& batch) = 0;
  virtual void order_after(comm::Batch& batch, CommGroup group) = 0;
  /// Host MPI: the executor polls in-flight batches between compute ops (MPI progresses
  /// nonblocking collectives only inside MPI calls), and hands the backend `poll` to call
  /// between the kernels inside one op as well.
  virtual bool wants_progress() const { return false; }
  virtual void set_progress(std::function<void()> /*poll*/) {}

  virtual void begin_step(long step) = 0;
  virtual void pack(const StepOp& op) = 0;
  /// After wait_weights: the group's slot holds what was broadcast / gathered.
  virtual void weights_arrived(const StepOp& op) = 0;
  virtual void forward(const StepOp& op, long step) = 0;
  virtual void backward(const StepOp& op, long step) = 0;
  /// Test aid (--inject-nan-step): makes the gradient backward just wrote non-finite.
  virtual void poison_gradient(const StepOp& op) = 0;
  virtual void release_weights(const StepOp& op) = 0;
  virtual void prepare(const StepOp& op, long step) = 0;
  virtual void newton_schulz(const StepOp& op) = 0;
  virtual void apply(const StepOp& op, long step) = 0;
  /// --clip-norm (grad_clip.hpp): writes this rank's part of the norm into the clip scalar
  /// (BufferRef::Kind::clip_norm), then, after its all-reduce, scales every gradient the
  /// optimizer consumes here. Backends without them refuse the option before a run
  /// (engine_options.cpp), so the defaults are never reached.
  virtual void clip_partial(const StepOp& /*op*/) {
    throw std::logic_error("this backend does not implement --clip-norm");
  }
  virtual void clip_scale(const StepOp& /*op*/) {
    throw std::logic_error("this backend does not implement --clip-norm");
  }
  /// --tp (docs/METRICS.md "Tensor parallelism"): tp_stage puts this rank's shard of the
  /// parameter's Nesterov input (BufferRef ns_input) on the gather's wire (tp_send); on the TP
  /// owner, tp_assemble makes the logical matrix (tp_matrix) from the gathered shards
  /// (tp_recv), which newton_schulz then works on, and tp_split cuts the output into the T
  /// shards the scatter sends (tp_shards). Backends without them are refused --tp before a run
  /// (validate_run), so the defaults are never reached.
  virtual void tp_stage(const StepOp& /*op*/) {
    throw std::logic_error("this backend does not implement the TP exchange (--tp)");
  }
  virtual void tp_assemble(const StepOp& /*op*/) {
    throw std::logic_error("this backend does not implement the TP exchange (--tp)");
  }
  virtual void tp_split(const StepOp& /*op*/) {
    throw std::logic_error("this backend does not implement the TP exchange (--tp)");
  }
  /// The activation work of one unit in one phase (act_forward, act_recompute, act_backward;
  /// activation_work.hpp): its ops run for their cost, their outputs read by nothing.
  /// Backends without it are refused a run with activation work (validate_run).
  virtual void activation(const StepOp& /*op*/) {
    throw std::logic_error("this backend does not run the step's activation work");
  }
  /// A pipeline stage's send or receive (OpClass::p2p, step/pipeline_order.hpp): a receive
  /// returns once its message is here. Backends without pipeline stages are refused them
  /// (validate).
  virtual void pipeline_transfer(const StepOp& /*op*/) {
    throw std::logic_error("this backend does not run pipeline stages");
  }
  /// Ends the step: joins the queues. A non-finite gradient or weight a kernel saw during the
  /// step is kept for take_nonfinite() (the engine ends the run on every rank with it).
  virtual void end_step(long step) = 0;
  /// The first "non-finite gradient/weight in parameter 'p' at step s" seen since the last
  /// call ("" when none), and forgets it.
  virtual std::string take_nonfinite() { return {}; }
  /// Milliseconds the activation work's EP all-to-alls took since the last call (the host
  /// runs them blocking: their in-flight time); 0 where they are not timed (CUDA: ordered on
  /// the compute stream).
  virtual double take_token_exchange_ms() { return 0; }
  virtual PhaseTimer& timer() = 0;
  /// --trace's clock (step_trace.hpp) where the backend's work runs asynchronously (CUDA:
  /// events in stream order); null: the executor stamps wall time (host, synchronous).
  virtual TraceClock* trace_clock() { return nullptr; }

  /// Copies `count` fp32 elements of the master arena from `offset` to host memory (results
  /// and --check; outside the timed steps).
  virtual void read_masters(std::int64_t offset, std::int64_t count, float* host) = 0;
  /// Bytes the backend allocated, by kind, for the results' memory figures.
  virtual std::int64_t allocated_bytes() const = 0;
  /// After every op the executor runs (kernel, issue, wait or bookkeeping): where a backend
  /// accounts the buffers the op filled or last read (memory_tracker.hpp).
  virtual void op_done(const StepOp& /*op*/) {}
  /// The error path (an exception left a step mid-way): aborts every communicator before
  /// anything synchronises, since peers may never complete what is in flight; afterwards the
  /// backend is only destroyed, and its destructor does not wait for the device. Host: nothing
  /// to abort (the job ends through abort_all).
  virtual void abort() noexcept {}
  /// This rank's peak of the buffers the memory model counts; `measured` false where the
  /// backend keeps no account (CUDA).
  virtual MeasuredMemory measured_memory() const { return {}; }
};

}  // namespace dmuon::engine
