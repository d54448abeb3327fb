#include "dmuon/project/rank_program.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "dmuon/base/error.hpp"

namespace dmuon::project {

using engine::Op;

BatchSpec batch_spec(const engine::StepLayout& layout, const engine::StepOp& op,
                     const engine::StepSpec& options) {
  BatchSpec b;
  b.comm = op.comm;
  b.op = op.op;
  b.group = op.group;
  for (const auto& c : engine::collectives_of(layout, op, options))
    b.calls.push_back(
        {c.kind, c.count, static_cast<std::uint8_t>(comm::dtype_size(c.dtype)), c.root});
  return b;
}

namespace {

using engine::BatchSlot;
using engine::kBatchSlotCount;

// compile_program's state: the instructions so far and what waits need to count back.
class Compiler {
 public:
  // `ops`: the schedule's length, a bound on the instructions (hooks and merged compute ops
  // take none; a blocking issue takes two, but is one of several ops of its parameter).
  Compiler(const DurationFn& duration, const BatchFn& batch, std::size_t ops,
           std::vector<Instruction> reuse)
      : duration_(duration), batch_(batch) {
    prog_.code = std::move(reuse);
    prog_.code.clear();
    prog_.code.reserve(ops);
  }

  void add(const engine::StepOp& op) {
    if (segments_.enter(op)) {
      flush_switch();  // two switches in a row: the first keeps its (empty) segment
      switch_pending_ = true;
      switch_phase_ = static_cast<std::uint8_t>(segments_.phase());
      switch_exposed_ = segments_.exposed();
    }
    const engine::OpTraits t = engine::op_traits(op.op);
    switch (t.cls) {
      case engine::OpClass::hook:
        ++prog_.hook_calls;
        prog_.hook_comm_calls += op.communicates ? 1 : 0;
        break;
      case engine::OpClass::compute: compute(op); break;
      case engine::OpClass::issue: issue(op, t); break;
      case engine::OpClass::wait: wait(op, t); break;
      case engine::OpClass::bookkeeping: break;  // release_weights
    }
  }

  // A previous-step wait counts back past this step's start: over the issues before it, then
  // over the previous step's from its last down to the awaited one. Nothing published: none.
  RankProgram finish() {
    flush_switch();
    for (const auto& w : replica_waits_) {
      const int awaited = at(w.group)[static_cast<std::size_t>(BatchSlot::replica)];
      if (awaited < 0) continue;
      const Issued& i = issued_[static_cast<std::size_t>(awaited)];
      Instruction& in = prog_.code[w.instruction];
      in.comm = i.comm;
      in.back = w.count[i.comm] + count_[i.comm] - i.seq;
    }
    return std::move(prog_);
  }

 private:
  // Each issue of the step as (communicator, its sequence number there).
  struct Issued {
    std::uint8_t comm;
    int seq;
  };
  struct PendingReplica {
    std::size_t instruction;
    int group;
    std::array<int, engine::kCommGroupCount> count;  // issues before it, per communicator
  };

  // Appends an instruction, carrying the phase switch that precedes it.
  void emit(Instruction in) {
    if (switch_pending_) {
      in.switches = true;
      in.phase = switch_phase_;
      in.exposed = switch_exposed_;
      switch_pending_ = false;
    }
    prog_.code.push_back(in);
  }

  // A pending switch that no instruction will carry becomes its own instruction.
  void flush_switch() {
    if (!switch_pending_) return;
    Instruction in;
    in.kind = Instruction::switch_phase;
    emit(in);
  }

  int back_to(int issue) const {
    const Issued& i = issued_[static_cast<std::size_t>(issue)];
    return count_[i.comm] - i.seq;
  }

  // Per group (the clip ops' group -1 is slot row 0): the issue index that last filled a slot.
  std::array<int, kBatchSlotCount>& at(int g) {
    const auto i = static_cast<std::size_t>(std::max(g, 0));
    if (i >= filled_.size()) {
      std::array<int, kBatchSlotCount> none;
      none.fill(-1);
      filled_.resize(i + 1, none);
    }
    return filled_[i];
  }

  void compute(const engine::StepOp& op) {
    const double s = duration_(op);
    if (s <= 0) return;
    auto& code = prog_.code;
    if (!switch_pending_ && !code.empty() && code.back().kind == Instruction::compute) {
      code.back().seconds += s;
      return;
    }
    Instruction in;
    in.kind = Instruction::compute;
    in.seconds = s;
    emit(in);
  }

  void issue(const engine::StepOp& op, const engine::OpTraits& t) {
    const auto c = static_cast<std::size_t>(op.comm);
    const BatchSpec* spec = batch_(op, count_[c]);
    if (spec == nullptr || spec->calls.empty())
      throw RuntimeFailure(fmt::format("projection: {} of group {} issues no collective",
                                       engine::op_name(op.op), op.group));
    Instruction in;
    in.kind = Instruction::issue;
    in.stream = static_cast<std::uint8_t>(t.stream);
    in.comm = static_cast<std::uint8_t>(op.comm);
    in.spec = spec;
    if (t.after != BatchSlot::none) {
      const int dep = at(op.group)[static_cast<std::size_t>(t.after)];
      if (dep >= 0) {
        in.dep_comm = issued_[static_cast<std::size_t>(dep)].comm;
        in.dep_back = back_to(dep);
      }
    }
    const int index = static_cast<int>(issued_.size());
    issued_.push_back({in.comm, count_[c]++});
    emit(in);
    if (t.blocking) {
      Instruction wait;
      wait.kind = Instruction::wait;
      wait.comm = in.comm;
      wait.back = 1;
      emit(wait);
    } else {
      at(op.group)[static_cast<std::size_t>(t.slot)] = index;
    }
  }

  void wait(const engine::StepOp& op, const engine::OpTraits& t) {
    Instruction in;
    in.kind = Instruction::wait;
    const int awaited = at(op.group)[static_cast<std::size_t>(t.slot)];
    if (awaited >= 0) {
      in.comm = issued_[static_cast<std::size_t>(awaited)].comm;
      in.back = back_to(awaited);
    } else {
      if (op.op != Op::take_replica)
        throw RuntimeFailure(fmt::format("projection: {} of group {} waits for nothing issued",
                                         engine::op_name(op.op), op.group));
      // Resolved in finish(): the previous step's publish of this group.
      replica_waits_.push_back({prog_.code.size(), op.group, count_});
    }
    emit(in);
  }

  const DurationFn& duration_;
  const BatchFn& batch_;
  RankProgram prog_;
  engine::PhaseSegmenter segments_;
  std::vector<Issued> issued_;
  std::array<int, engine::kCommGroupCount> count_{};  // issues so far per communicator
  std::vector<std::array<int, kBatchSlotCount>> filled_;
  std::vector<PendingReplica> replica_waits_;  // take_replica before this step's publish
  bool switch_pending_ = false;                // a phase switch the next instruction carries
  std::uint8_t switch_phase_ = 0;
  bool switch_exposed_ = false;
};

}  // namespace

RankProgram compile_program(const engine::Schedule& schedule, const DurationFn& duration,
                            const BatchFn& batch, std::vector<Instruction> reuse) {
  Compiler c(duration, batch, schedule.size(), std::move(reuse));
  for (const auto& op : schedule) c.add(op);
  return c.finish();
}

}  // namespace dmuon::project
