#include "dmuon/engine/exec/step_executor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <utility>

#include "dmuon/base/error.hpp"
#include "dmuon/comm/bus_bandwidth.hpp"
#include "dmuon/comm/collective_counters.hpp"

namespace dmuon::engine {

namespace {

// Issues one collective of a batch on `c` with the memory the backend resolves.
void issue_call(comm::Communicator& c, StepBackend& backend, const CollectiveCall& call) {
  using comm::CollectiveKind;
  void* buf = backend.buffer(call.buffer);
  const auto count = static_cast<std::size_t>(call.count);
  const bool root = c.rank() == call.root;
  switch (call.kind) {
    case CollectiveKind::broadcast: c.broadcast(buf, count, call.dtype, call.root); break;
    case CollectiveKind::reduce:
      c.reduce_avg(buf, root ? buf : nullptr, count, call.dtype, call.root);
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
    case CollectiveKind::gather:
      c.gather(buf, root ? backend.buffer(call.recv) : nullptr, count, call.dtype, call.root);
      break;
    case CollectiveKind::scatter:
      c.scatter(root ? buf : nullptr, backend.buffer(call.recv), count, call.dtype, call.root);
      break;
    case CollectiveKind::all_to_all:
      c.all_to_all(buf, backend.buffer(call.recv), count, call.dtype);
      break;
    case CollectiveKind::send_recv:  // a stage's transfers are p2p ops, not scheduled calls
      throw std::logic_error("step executor: a send_recv is not a scheduled collective");
  }
}

}  // namespace

StepExecutor::StepExecutor(const StepLayout& layout, const Schedule& schedule,
                           const StepSpec& options, StepBackend& backend, int inject_nan_step)
    : layout_(layout),
      schedule_(schedule),
      backend_(backend),
      inject_nan_step_(inject_nan_step),
      poisoner_(layout.me.rank == layout.me.grid.world() - 1) {
  calls_.reserve(schedule.size());
  channel_mask_.reserve(schedule.size());
  for (const auto& op : schedule) {
    calls_.push_back(collectives_of(layout, op, options));
    std::uint64_t mask = 0;
    for (const auto& call : calls_.back()) {
      const comm::Communicator* c = backend.comm(op.comm);
      const int n = c != nullptr ? c->size() : 1;
      const std::size_t ch = channel_index(op.comm, call.kind);
      mask |= std::uint64_t{1} << ch;
      message_bytes_[ch] +=
          comm::message_bytes(call.kind, call.count, comm::dtype_size(call.dtype), n);
      group_size_[ch] = n;
    }
    channel_mask_.push_back(mask);
    add_token_exchanges(op);
    add_pipeline_message(op, options);
  }
  slots_.resize(layout.groups.size() + 1);
  polls_ = backend.wants_progress();
  if (polls_) backend.set_progress([this] { progress(); });
}

StepExecutor::~StepExecutor() = default;

// An activation op's EP all-to-alls (--ep with --seq-len: the backend runs them inside the
// op, over the EP group) in the channel figures, as the scheduled collectives'.
void StepExecutor::add_token_exchanges(const StepOp& op) {
  if (!is_activation_op(op.op)) return;
  const std::size_t ch = channel_index(CommGroup::ep, comm::CollectiveKind::all_to_all);
  for (const auto& o : unit_ops(*layout_.activation, op)) {
    if (o.kind != work::OpKind::ep_collective) continue;
    const TokenExchange x = token_exchange(o);
    message_bytes_[ch] +=
        comm::message_bytes(comm::CollectiveKind::all_to_all, static_cast<std::int64_t>(x.chunk),
                            comm::dtype_size(x.dtype), x.group);
    group_size_[ch] = x.group;
  }
}

// A stage boundary's send or receive (--pp): one fp32 message between two ranks.
void StepExecutor::add_pipeline_message(const StepOp& op, const StepSpec& options) {
  if (op_traits(op.op).cls != OpClass::p2p) return;
  const std::size_t ch = channel_index(CommGroup::pipeline, comm::CollectiveKind::send_recv);
  message_bytes_[ch] += comm::message_bytes(comm::CollectiveKind::send_recv,
                                            options.stages.message_elems, sizeof(float), 2);
  group_size_[ch] = 2;
}

comm::Batch& StepExecutor::slot(int g, BatchSlot s) {
  const std::size_t row = g >= 0 ? static_cast<std::size_t>(g) : slots_.size() - 1;
  return slots_[row][static_cast<std::size_t>(s)];
}

comm::Batch StepExecutor::issue(std::size_t i, std::size_t& mark) {
  const StepOp& op = schedule_[i];
  comm::Communicator* c = backend_.comm(op.comm);
  if (c == nullptr)
    throw RuntimeFailure(std::string("step schedule issues ") + op_name(op.op) + " on the " +
                         comm_group_name(op.comm) + " communicator, which this rank does not have");
  backend_.before_issue(op);
  if (trace_) mark = trace_->mark(op_traits(op.op).stream);
  c->group_start();
  for (const auto& call : calls_[i]) issue_call(*c, backend_, call);
  return c->group_end();
}

void StepExecutor::started(comm::Batch& b, std::size_t op_index) {
  if (!polls_ || !b.pending()) return;
  in_flight_.push_back(&b);
  in_flight_clock_.open(&b, channel_mask_[op_index]);
}

void StepExecutor::complete(comm::Batch& b) {
  backend_.wait(b);
  if (trace_) trace_->completed(&b);
  if (!polls_) return;
  in_flight_clock_.close(&b);
  in_flight_.erase(std::remove(in_flight_.begin(), in_flight_.end(), &b), in_flight_.end());
}

void StepExecutor::progress() {
  in_flight_.erase(std::remove_if(in_flight_.begin(), in_flight_.end(),
                                  [this](comm::Batch* b) {
                                    if (!b->ready()) return false;
                                    in_flight_clock_.close(b);
                                    if (trace_) trace_->completed(b);
                                    return true;
                                  }),
                   in_flight_.end());
}

void StepExecutor::compute(const StepOp& op, long step) {
  switch (op.op) {
    case Op::pack: backend_.pack(op); break;
    case Op::forward: backend_.forward(op, step); break;
    case Op::backward:
      backend_.backward(op, step);
      if (step == inject_nan_step_ && poisoner_ && op.param == layout_.nan_param)
        backend_.poison_gradient(op);
      break;
    case Op::prepare: backend_.prepare(op, step); break;
    case Op::newton_schulz: backend_.newton_schulz(op); break;
    case Op::apply: backend_.apply(op, step); break;
    case Op::clip_partial: backend_.clip_partial(op); break;
    case Op::clip_scale: backend_.clip_scale(op); break;
    case Op::tp_stage: backend_.tp_stage(op); break;
    case Op::tp_assemble: backend_.tp_assemble(op); break;
    case Op::tp_split: backend_.tp_split(op); break;
    case Op::act_forward:
    case Op::act_recompute:
    case Op::act_backward: backend_.activation(op); break;
    default:
      throw std::logic_error(std::string("step executor: ") + op_name(op.op) +
                             " is not a compute op");
  }
  if (polls_) progress();
}

// A stage's send or receive, its wall time the pipeline channel's in-flight time (a receive
// waits for its message; a send is posted).
void StepExecutor::transfer(const StepOp& op) {
  const auto start = std::chrono::steady_clock::now();
  backend_.pipeline_transfer(op);
  pipeline_ms_ +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (polls_) progress();
}

void StepExecutor::issue_op(std::size_t i) {
  const StepOp& op = schedule_[i];
  const OpTraits t = op_traits(op.op);
  // Ordered after one earlier batch of the group only (HSDP stage 2 after stage 1).
  if (t.after != BatchSlot::none) backend_.order_after(slot(op.group, t.after), op.comm);
  comm::Batch& b = slot(op.group, t.slot);
  if (trace_) trace_->completed(&b);  // a slot's earlier batch, if still open
  std::size_t mark = 0;               // --trace: the stamp just before the batch's collectives
  b = issue(i, mark);
  if (trace_) trace_->issued(&b, mark, t.stream, batch_fields(i), b.pending());
  started(b, i);
  if (t.blocking) complete(b);
}

void StepExecutor::throw_injected_fault(long step) const {
  if (step != fault_.step || layout_.me.rank != fault_.rank) return;
  throw RuntimeFailure(fmt::format(
      "injected fault (DMUON_INJECT_FAULT_STEP={}:{}) in step {}, its collectives in flight",
      fault_.step, fault_.rank, step));
}

StepMeasure StepExecutor::run_step(long step) {
  StepMeasure m;
  PhaseTimer& timer = backend_.timer();
  // Batches still in flight from the previous step (HSDP replicas) stay polled.
  in_flight_.clear();
  for (auto& row : slots_)
    if (row[static_cast<std::size_t>(BatchSlot::replica)].pending())
      in_flight_.push_back(&row[static_cast<std::size_t>(BatchSlot::replica)]);
  backend_.begin_step(step);
  timer.start_step();
  in_flight_clock_.start_step();
  if (trace_) trace_->begin_step(step);
  PhaseSegmenter segments;
  // --trace: the segment open since seg_start (a copy: enter() moves the segmenter on).
  std::optional<PhaseSegmenter> open_segment;
  std::size_t seg_start = 0;
  auto close_segment = [&] {
    if (trace_ && open_segment)
      trace_->close(TraceTrack::phases, phase_name(open_segment->phase()), seg_start,
                    open_segment->exposed());
  };
  for (std::size_t i = 0; i < schedule_.size(); ++i) {
    const StepOp& op = schedule_[i];
    if (segments.enter(op)) {
      close_segment();
      open_segment = segments;
      seg_start = trace_ ? trace_->mark_compute() : 0;
      timer.switch_to(segments.phase(), segments.exposed());
    }
    const OpTraits t = op_traits(op.op);
    const bool spanned =
        trace_ && (t.cls == OpClass::compute || t.cls == OpClass::wait || t.cls == OpClass::p2p);
    const std::size_t t0 = spanned ? trace_->mark_compute() : 0;
    switch (t.cls) {
      case OpClass::compute: compute(op, step); break;
      case OpClass::issue: issue_op(i); break;
      case OpClass::wait:
        throw_injected_fault(step);
        complete(slot(op.group, t.slot));
        if (op.op == Op::wait_weights) backend_.weights_arrived(op);
        break;
      case OpClass::hook:
        ++m.hook_calls;
        m.hook_comm_calls += op.communicates ? 1 : 0;
        break;
      case OpClass::bookkeeping: backend_.release_weights(op); break;
      case OpClass::p2p: transfer(op); break;
    }
    if (spanned)
      trace_->close(
          TraceTrack::compute,
          fmt::format("{}{} g{}", t.cls == OpClass::wait ? "wait " : "", op_name(op.op), op.group),
          t0);
    backend_.op_done(op);
  }
  close_segment();
  timer.pause();
  backend_.end_step(step);
  if (trace_) trace_->flush(/*all=*/false);
  m.phases_ms = timer.finish_step();
  m.in_flight_measured = polls_;
  m.in_flight_ms = in_flight_clock_.finish_step();
  m.in_flight_ms[channel_index(CommGroup::ep, comm::CollectiveKind::all_to_all)] +=
      backend_.take_token_exchange_ms();
  m.in_flight_ms[channel_index(CommGroup::pipeline, comm::CollectiveKind::send_recv)] +=
      std::exchange(pipeline_ms_, 0.0);
  m.message_bytes = message_bytes_;
  m.group_size = group_size_;
  // Everything but the replicas completed inside the step (the schedule waits for it).
  in_flight_.clear();
  return m;
}

void StepExecutor::record_into(Trace* trace) {
  if (trace == nullptr) {
    trace_.reset();
    return;
  }
  TraceClock* clock = backend_.trace_clock();
  if (clock == nullptr) {
    wall_clock_ = std::make_unique<WallTraceClock>();
    clock = wall_clock_.get();
  }
  trace_ = std::make_unique<StepTrace>(*trace, *clock, layout_.me.rank);
}

TraceSpan StepExecutor::batch_fields(std::size_t op_index) const {
  const StepOp& op = schedule_[op_index];
  const comm::Communicator* c = backend_.comm(op.comm);
  TraceSpan span;
  span.name = fmt::format("{} g{}", op_name(op.op), op.group);
  span.group = op.group;
  span.comm = comm_group_word(op.comm);
  span.calls = static_cast<int>(calls_[op_index].size());
  span.payload_bytes = span.counted_bytes = 0;
  for (const auto& call : calls_[op_index]) {
    const std::size_t elem = comm::dtype_size(call.dtype);
    span.payload_bytes += call.count * static_cast<std::int64_t>(elem);
    span.counted_bytes += comm::counted_bytes(call.kind, c->size(), c->rank() == call.root,
                                              static_cast<std::size_t>(call.count), elem);
  }
  return span;
}

void StepExecutor::finish() {
  for (auto& row : slots_) {
    auto& replica = row[static_cast<std::size_t>(BatchSlot::replica)];
    backend_.wait(replica);
    if (trace_) trace_->completed(&replica);
  }
  backend_.end_step(0);
  if (trace_) trace_->flush(/*all=*/true);
}

}  // namespace dmuon::engine
