#include "dmuon/engine/step_executor.hpp"

#include <algorithm>

#include "dmuon/base/error.hpp"
#include "dmuon/comm/bus_bandwidth.hpp"

namespace dmuon::engine {

namespace {

// Issues one collective of a batch on `c` with the memory the backend resolves.
void issue_call(comm::Communicator& c, StepBackend& backend, const CollectiveCall& call) {
  using comm::CollectiveKind;
  void* buf = backend.buffer(call.buffer);
  const auto count = static_cast<std::size_t>(call.count);
  switch (call.kind) {
    case CollectiveKind::broadcast: c.broadcast(buf, count, call.dtype, call.root); break;
    case CollectiveKind::reduce:
      c.reduce_avg(buf, c.rank() == call.root ? buf : nullptr, count, call.dtype, call.root);
      break;
    case CollectiveKind::all_gather: {
      // In place: this rank's part already sits at rank·count of the full buffer.
      auto* own = static_cast<unsigned char*>(buf) +
                  static_cast<std::size_t>(c.rank()) * count * comm::dtype_size(call.dtype);
      c.all_gather(own, buf, count, call.dtype);
      break;
    }
    case CollectiveKind::reduce_scatter:
      c.reduce_scatter_avg(buf, backend.buffer(call.recv), count, call.dtype);
      break;
    case CollectiveKind::all_reduce:
      if (call.op == CollectiveCall::Reduce::sum)
        c.all_reduce_sum(buf, buf, count, call.dtype);
      else if (call.op == CollectiveCall::Reduce::max)
        c.all_reduce_max(buf, buf, count, call.dtype);
      else
        c.all_reduce_avg(buf, buf, count, call.dtype);
      break;
  }
}

}  // namespace

StepExecutor::StepExecutor(const StepLayout& layout, const Schedule& schedule,
                           const ScheduleOptions& options, StepBackend& backend,
                           int inject_nan_step)
    : layout_(layout),
      schedule_(schedule),
      backend_(backend),
      inject_nan_step_(inject_nan_step),
      poisoner_(layout.me.rank == layout.me.world() - 1) {
  calls_.reserve(schedule.size());
  channel_mask_.reserve(schedule.size());
  for (const auto& op : schedule) {
    calls_.push_back(collectives_of(layout, op, options));
    std::uint32_t mask = 0;
    for (const auto& call : calls_.back()) {
      const CommGroup group = call.comm;
      const comm::Communicator* c = backend.comm(group);
      const int n = c != nullptr ? c->size() : 1;
      const std::size_t ch = channel_index(group, call.kind);
      mask |= std::uint32_t{1} << ch;
      message_bytes_[ch] +=
          comm::message_bytes(call.kind, call.count, comm::dtype_size(call.dtype), n);
      group_size_[ch] = n;
    }
    channel_mask_.push_back(mask);
  }
  const std::size_t n = layout.groups.size();
  weights_.resize(n);
  reduce_.resize(n);
  stage2_.resize(n);
  gather_.resize(n);
  replica_.resize(n);
  polls_ = backend.wants_progress();
  if (polls_) backend.set_progress([this] { progress(); });
}

StepExecutor::~StepExecutor() = default;

comm::Batch StepExecutor::issue(std::size_t i) {
  const StepOp& op = schedule_[i];
  const CommGroup group = comm_of(layout_, op.op);
  comm::Communicator* c = backend_.comm(group);
  if (c == nullptr)
    throw RuntimeFailure(std::string("step schedule issues ") + op_name(op.op) +
                         " on a communicator this rank does not have");
  backend_.before_issue(op);
  c->group_start();
  for (const auto& call : calls_[i]) issue_call(*c, backend_, call);
  return c->group_end();
}

void StepExecutor::started(comm::Batch& b, std::size_t op_index) {
  if (!polls_ || !b.pending()) return;
  in_flight_.push_back(&b);
  in_flight_clock_.open(&b, channel_mask_[op_index]);
}

void StepExecutor::completed(comm::Batch& b) {
  if (polls_) in_flight_clock_.close(&b);
}

void StepExecutor::progress() {
  in_flight_.erase(std::remove_if(in_flight_.begin(), in_flight_.end(),
                                  [this](comm::Batch* b) {
                                    if (!b->ready()) return false;
                                    in_flight_clock_.close(b);
                                    return true;
                                  }),
                   in_flight_.end());
}

StepMeasure StepExecutor::run_step(long step) {
  StepMeasure m;
  PhaseTimer& timer = backend_.timer();
  // Batches still in flight from the previous step (HSDP replicas) stay polled.
  in_flight_.clear();
  for (auto& b : replica_)
    if (b.pending()) in_flight_.push_back(&b);
  auto compute_done = [&] {
    if (polls_) progress();
  };
  backend_.begin_step(step);
  timer.start_step();
  in_flight_clock_.start_step();
  bool timing = false;
  Phase current = Phase::step;
  bool current_exposed = false;
  for (std::size_t i = 0; i < schedule_.size(); ++i) {
    const StepOp& op = schedule_[i];
    const auto g = static_cast<std::size_t>(op.group);  // unused by group-less ops (-1)
    if (op.timed && (!timing || op.phase != current || op.exposed != current_exposed)) {
      timer.switch_to(op.phase, op.exposed);
      timing = true;
      current = op.phase;
      current_exposed = op.exposed;
    }
    switch (op.op) {
      case Op::take_replica:
        backend_.wait(replica_[g]);
        completed(replica_[g]);
        break;
      case Op::pack: backend_.pack(op); break;
      case Op::issue_weights:
        weights_[g] = issue(i);
        started(weights_[g], i);
        break;
      case Op::wait_weights:
        backend_.wait(weights_[g]);
        completed(weights_[g]);
        backend_.weights_arrived(op);
        break;
      case Op::forward:
        backend_.forward(op, step);
        compute_done();
        break;
      case Op::release_weights: backend_.release_weights(op); break;
      case Op::backward:
        backend_.backward(op, step);
        if (step == inject_nan_step_ && poisoner_ && op.param == layout_.nan_param)
          backend_.poison_gradient(op);
        compute_done();
        break;
      case Op::issue_reduce:
        reduce_[g] = issue(i);
        started(reduce_[g], i);
        break;
      case Op::wait_reduce:
        backend_.wait(reduce_[g]);
        completed(reduce_[g]);
        break;
      case Op::issue_stage2:
        backend_.order_after(reduce_[g], CommGroup::replicate);
        stage2_[g] = issue(i);
        started(stage2_[g], i);
        break;
      case Op::wait_stage2:
        backend_.wait(stage2_[g]);
        completed(stage2_[g]);
        break;
      case Op::prepare: backend_.prepare(op, step); break;
      case Op::issue_gather:
        gather_[g] = issue(i);
        started(gather_[g], i);
        break;
      case Op::wait_gather:
        backend_.wait(gather_[g]);
        completed(gather_[g]);
        break;
      case Op::newton_schulz:
        backend_.newton_schulz(op);
        compute_done();
        break;
      case Op::apply: backend_.apply(op, step); break;
      case Op::publish:
        replica_[g] = issue(i);
        started(replica_[g], i);
        break;
      case Op::clip_partial: backend_.clip_partial(op); break;
      case Op::issue_clip:
        clip_ = issue(i);
        started(clip_, i);
        break;
      case Op::wait_clip:
        backend_.wait(clip_);
        completed(clip_);
        break;
      case Op::clip_scale: backend_.clip_scale(op); break;
      // Blocking on the TP group: nothing stays in flight, nothing to poll.
      case Op::tp_gather: backend_.tp_gather(op); break;
      case Op::tp_scatter: backend_.tp_scatter(op); break;
      case Op::hook:
        ++m.hook_calls;
        m.hook_comm_calls += op.communicates ? 1 : 0;
        break;
    }
  }
  timer.pause();
  backend_.end_step(step);
  m.phases_ms = timer.finish_step();
  m.in_flight_measured = polls_;
  m.in_flight_ms = in_flight_clock_.finish_step();
  m.message_bytes = message_bytes_;
  m.group_size = group_size_;
  // Everything but the replicas completed inside the step (the schedule waits for it).
  in_flight_.clear();
  return m;
}

void StepExecutor::finish() {
  for (auto& b : replica_) backend_.wait(b);
  backend_.end_step(0);
}

}  // namespace dmuon::engine
