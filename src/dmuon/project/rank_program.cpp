#include "dmuon/project/rank_program.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "dmuon/base/error.hpp"

namespace dmuon::project {

using engine::Op;

Stream stream_of(Op op) {
  switch (op) {
    case Op::issue_reduce: return Stream::reduce;
    case Op::issue_stage2:
    case Op::publish: return Stream::replicate;
    default: return Stream::weights;
  }
}

BatchSpec batch_spec(const engine::StepLayout& layout, const engine::StepOp& op,
                     const engine::ScheduleOptions& options) {
  BatchSpec b;
  b.comm = engine::comm_of(layout, op.op);
  b.op = op.op;
  b.group = op.group;
  if (b.comm == engine::CommGroup::tp) {
    const engine::TpCall tp = engine::tp_call_of(layout, op, options);
    b.calls.push_back({comm::CollectiveKind::broadcast, tp.count,
                       static_cast<std::uint8_t>(comm::dtype_size(tp.dtype)), tp.root});
    return b;
  }
  for (const auto& c : engine::collectives_of(layout, op, options))
    b.calls.push_back(
        {c.kind, c.count, static_cast<std::uint8_t>(comm::dtype_size(c.dtype)), c.root});
  return b;
}

namespace {

bool is_compute(Op op) {
  switch (op) {
    case Op::pack:
    case Op::forward:
    case Op::backward:
    case Op::prepare:
    case Op::newton_schulz:
    case Op::apply:
    case Op::clip_partial:
    case Op::clip_scale: return true;
    default: return false;
  }
}

bool is_issue(Op op) {
  switch (op) {
    case Op::issue_weights:
    case Op::issue_reduce:
    case Op::issue_stage2:
    case Op::issue_gather:
    case Op::issue_clip:
    case Op::publish:
    case Op::tp_gather:
    case Op::tp_scatter: return true;
    default: return false;
  }
}

// The engine runs these blocking: the compute stream waits for them where they are issued.
bool is_blocking(Op op) {
  return op == Op::tp_gather || op == Op::tp_scatter;
}

// The executor's per-group batch handles (StepExecutor: weights_, reduce_, stage2_, gather_,
// replica_), as the issue index that last filled them.
enum Handle { kWeights = 0, kReduce, kStage2, kGather, kReplica, kClip, kHandles };

int handle_of_issue(Op op) {
  switch (op) {
    case Op::issue_weights: return kWeights;
    case Op::issue_reduce: return kReduce;
    case Op::issue_stage2: return kStage2;
    case Op::issue_gather: return kGather;
    case Op::publish: return kReplica;
    case Op::issue_clip: return kClip;
    default: return -1;
  }
}

int handle_of_wait(Op op) {
  switch (op) {
    case Op::wait_weights: return kWeights;
    case Op::wait_reduce: return kReduce;
    case Op::wait_stage2: return kStage2;
    case Op::wait_gather: return kGather;
    case Op::take_replica: return kReplica;
    case Op::wait_clip: return kClip;
    default: return -1;
  }
}

}  // namespace

RankProgram compile_program(const engine::Schedule& schedule, const DurationFn& duration,
                            const BatchFn& batch, const engine::StepLayout* layout) {
  RankProgram prog;
  std::vector<std::array<int, kHandles>> handle;  // per group; the clip ops' group -1 is slot 0
  auto at = [&](int g) -> std::array<int, kHandles>& {
    const auto i = static_cast<std::size_t>(std::max(g, 0));
    if (i >= handle.size()) handle.resize(i + 1, {-1, -1, -1, -1, -1, -1});
    return handle[i];
  };
  struct PendingReplica {
    std::size_t instruction;
    int group;
  };
  std::vector<PendingReplica> replica_waits;  // take_replica before this step's publish
  std::array<int, engine::kCommCount> seq{};
  bool timing = false;
  int current_phase = -1;
  bool current_exposed = false;
  auto& code = prog.code;
  for (const auto& op : schedule) {
    if (op.timed &&
        (!timing || static_cast<int>(op.phase) != current_phase || op.exposed != current_exposed)) {
      Instruction in;
      in.kind = Instruction::switch_phase;
      in.phase = static_cast<std::uint8_t>(op.phase);
      in.exposed = op.exposed;
      code.push_back(in);
      timing = true;
      current_phase = static_cast<int>(op.phase);
      current_exposed = op.exposed;
    }
    if (op.op == Op::hook) {
      ++prog.hook_calls;
      prog.hook_comm_calls += op.communicates ? 1 : 0;
      continue;
    }
    if (is_compute(op.op)) {
      const double s = duration(op);
      if (s <= 0) continue;
      if (!code.empty() && code.back().kind == Instruction::compute)
        code.back().seconds += s;
      else {
        Instruction in;
        in.kind = Instruction::compute;
        in.seconds = s;
        code.push_back(in);
      }
      continue;
    }
    if (is_issue(op.op)) {
      const auto comm = layout ? engine::comm_of(*layout, op.op) : engine::comm_of(op.op);
      const BatchSpec* spec = batch(op, seq[static_cast<std::size_t>(comm)]++);
      if (spec == nullptr || spec->calls.empty())
        throw RuntimeFailure(fmt::format("projection: {} of group {} issues no collective",
                                         engine::op_name(op.op), op.group));
      Instruction in;
      in.kind = Instruction::issue;
      in.stream = static_cast<std::uint8_t>(stream_of(op.op));
      in.comm = static_cast<std::uint8_t>(comm);
      in.ref = static_cast<std::int32_t>(prog.batches.size());
      if (op.op == Op::issue_stage2) in.dep = at(op.group)[kReduce];
      prog.batches.push_back(spec);
      code.push_back(in);
      if (is_blocking(op.op)) {
        Instruction wait;
        wait.kind = Instruction::wait;
        wait.ref = in.ref;
        code.push_back(wait);
      } else {
        at(op.group)[static_cast<std::size_t>(handle_of_issue(op.op))] = in.ref;
      }
      continue;
    }
    const int h = handle_of_wait(op.op);
    if (h < 0) continue;  // release_weights: bookkeeping only
    Instruction in;
    in.kind = Instruction::wait;
    in.ref = at(op.group)[static_cast<std::size_t>(h)];
    if (in.ref < 0) {
      if (op.op != Op::take_replica)
        throw RuntimeFailure(fmt::format("projection: {} of group {} waits for nothing issued",
                                         engine::op_name(op.op), op.group));
      in.previous = true;  // resolved below: the previous step's publish of this group
      replica_waits.push_back({code.size(), op.group});
    }
    code.push_back(in);
  }
  for (const auto& w : replica_waits)
    code[w.instruction].ref = at(w.group)[kReplica];  // -1: nothing published, nothing to wait
  return prog;
}

}  // namespace dmuon::project
