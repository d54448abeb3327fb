#include "dmuon/engine/step_executor.hpp"

#include <algorithm>

#include "dmuon/base/error.hpp"

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
  for (const auto& op : schedule) calls_.push_back(collectives_of(layout, op, options));
  const std::size_t n = layout.groups.size();
  weights_.resize(n);
  reduce_.resize(n);
  stage2_.resize(n);
  gather_.resize(n);
  replica_.resize(n);
  if (backend.wants_progress()) backend.set_progress([this] { progress(); });
}

StepExecutor::~StepExecutor() = default;

comm::Batch StepExecutor::issue(std::size_t i) {
  const StepOp& op = schedule_[i];
  const CommGroup group = comm_of(op.op);
  comm::Communicator* c = backend_.comm(group);
  if (c == nullptr)
    throw RuntimeFailure(std::string("step schedule issues ") + op_name(op.op) +
                         " on a communicator this rank does not have");
  backend_.before_issue(op);
  c->group_start();
  for (const auto& call : calls_[i]) issue_call(*c, backend_, call);
  return c->group_end();
}

void StepExecutor::progress() {
  in_flight_.erase(std::remove_if(in_flight_.begin(), in_flight_.end(),
                                  [](comm::Batch* b) { return b->ready(); }),
                   in_flight_.end());
}

StepMeasure StepExecutor::run_step(long step) {
  StepMeasure m;
  PhaseTimer& timer = backend_.timer();
  const bool polls = backend_.wants_progress();
  // Batches still in flight from the previous step (HSDP replicas) stay polled.
  in_flight_.clear();
  for (auto& b : replica_)
    if (b.pending()) in_flight_.push_back(&b);
  auto track = [&](comm::Batch& b) {
    if (polls && b.pending()) in_flight_.push_back(&b);
  };
  auto compute_done = [&] {
    if (polls) progress();
  };
  backend_.begin_step(step);
  timer.start_step();
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
      case Op::take_replica: backend_.wait(replica_[g]); break;
      case Op::pack: backend_.pack(op); break;
      case Op::issue_weights:
        weights_[g] = issue(i);
        track(weights_[g]);
        break;
      case Op::wait_weights:
        backend_.wait(weights_[g]);
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
        track(reduce_[g]);
        break;
      case Op::wait_reduce: backend_.wait(reduce_[g]); break;
      case Op::issue_stage2:
        backend_.order_after(reduce_[g], CommGroup::replicate);
        stage2_[g] = issue(i);
        track(stage2_[g]);
        break;
      case Op::wait_stage2: backend_.wait(stage2_[g]); break;
      case Op::prepare: backend_.prepare(op, step); break;
      case Op::issue_gather:
        gather_[g] = issue(i);
        track(gather_[g]);
        break;
      case Op::wait_gather: backend_.wait(gather_[g]); break;
      case Op::newton_schulz:
        backend_.newton_schulz(op);
        compute_done();
        break;
      case Op::apply: backend_.apply(op, step); break;
      case Op::publish:
        replica_[g] = issue(i);
        track(replica_[g]);
        break;
      case Op::clip_partial: backend_.clip_partial(op); break;
      case Op::issue_clip:
        clip_ = issue(i);
        track(clip_);
        break;
      case Op::wait_clip: backend_.wait(clip_); break;
      case Op::clip_scale: backend_.clip_scale(op); break;
      case Op::hook:
        ++m.hook_calls;
        m.hook_comm_calls += op.communicates ? 1 : 0;
        break;
    }
  }
  timer.pause();
  backend_.end_step(step);
  m.phases_ms = timer.finish_step();
  // Everything but the replicas completed inside the step (the schedule waits for it).
  in_flight_.clear();
  return m;
}

void StepExecutor::finish() {
  for (auto& b : replica_) backend_.wait(b);
  backend_.end_step(0);
}

}  // namespace dmuon::engine
