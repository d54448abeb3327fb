#include "dmuon/project/rank_program.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <stdexcept>

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

using engine::BatchSlot;
using engine::kBatchSlotCount;

namespace {

// engine::op_traits as a table: looked up for every op of every rank's schedule.
constexpr std::array<engine::OpTraits, engine::kOpCount> trait_table() {
  std::array<engine::OpTraits, engine::kOpCount> t{};
  for (std::size_t i = 0; i < engine::kOpCount; ++i) t[i] = engine::op_traits(static_cast<Op>(i));
  return t;
}
constexpr std::array<engine::OpTraits, engine::kOpCount> kTraits = trait_table();

}  // namespace

// compile_program's state: the instructions so far and what waits need to count back.
class ProgramCompiler::Impl {
 public:
  // `reuse`: storage for the instructions; compile_program reserves the schedule's length in
  // it, a bound on the instructions (hooks and merged compute ops take none; a blocking issue
  // takes two, but is one of several ops of its parameter).
  Impl(const DurationFn& duration, const BatchFn& batch, std::vector<Instruction> reuse,
       bool hoist_stage2)
      : duration_(duration), batch_(batch), hoist_stage2_(hoist_stage2) {
    prog_.code = std::move(reuse);
    prog_.code.clear();
  }

  void add(const engine::StepOp& op) {
    if (segments_.enter(op)) {
      flush_switch();  // two switches in a row: the first keeps its (empty) segment
      switch_pending_ = true;
      switch_phase_ = static_cast<std::uint8_t>(segments_.phase());
      switch_exposed_ = segments_.exposed();
    }
    const engine::OpTraits& t = kTraits[static_cast<std::size_t>(op.op)];
    switch (t.cls) {
      case engine::OpClass::hook:
        ++prog_.hook_calls;
        prog_.hook_comm_calls += op.communicates ? 1 : 0;
        break;
      case engine::OpClass::compute: compute(op); break;
      case engine::OpClass::issue: issue(op, t); break;
      case engine::OpClass::wait: wait(op, t); break;
      case engine::OpClass::bookkeeping: break;  // release_weights
      case engine::OpClass::p2p:  // a projected pipeline composes its stages' steps instead
        throw std::logic_error(
            "compile_program: a stage's sends and receives are not replayed "
            "(pipeline_schedule.hpp composes the stages)");
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

  // Appends an instruction of `kind`, carrying the phase switch that precedes it; the caller
  // fills in the rest. Built in place: copying one assembled on the stack stalls on store
  // forwarding (its fields written narrow, read back wide), ~100,000 times per rank.
  Instruction& emit(Instruction::Kind kind) {
    Instruction& in = prog_.code.emplace_back();
    in.kind = kind;
    if (switch_pending_) {
      in.switches = true;
      in.phase = switch_phase_;
      in.exposed = switch_exposed_;
      switch_pending_ = false;
    }
    return in;
  }

  // A pending switch that no instruction will carry becomes its own instruction.
  void flush_switch() {
    if (switch_pending_) emit(Instruction::switch_phase);
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
      filled_.resize(std::max(i + 1, 2 * filled_.size()), none);  // rows past i: none filled
    }
    return filled_[i];
  }

  void compute(const engine::StepOp& op) {
    const OpSeconds s = duration_(op);
    if (s.seconds <= 0) return;
    auto& code = prog_.code;
    if (!switch_pending_ && !code.empty() && code.back().kind == Instruction::compute) {
      code.back().seconds += s.seconds;
      code.back().sm_seconds += s.sm_seconds;
      return;
    }
    Instruction& in = emit(Instruction::compute);
    in.seconds = s.seconds;
    in.sm_seconds = s.sm_seconds;
  }

  void issue(const engine::StepOp& op, const engine::OpTraits& t) {
    const auto c = static_cast<std::size_t>(op.comm);
    const BatchSpec* spec = batch_(op, count_[c]);
    if (spec == nullptr || spec->calls.empty())
      throw RuntimeFailure(fmt::format("projection: {} of group {} issues no collective",
                                       engine::op_name(op.op), op.group));
    const auto comm = static_cast<std::uint8_t>(op.comm);
    std::uint8_t dep_comm = 0;
    std::int32_t dep_back = 0;
    if (t.after != BatchSlot::none) {
      const int dep = at(op.group)[static_cast<std::size_t>(t.after)];
      if (dep >= 0) {
        dep_comm = issued_[static_cast<std::size_t>(dep)].comm;
        dep_back = back_to(dep);
      }
    }
    const int index = static_cast<int>(issued_.size());
    Issued& issued = issued_.emplace_back();  // in place, as emit()'s instructions
    issued.comm = comm;
    issued.seq = count_[c]++;
    const bool hoisted = hoist_stage2_ && dep_back > 0 && !t.blocking;
    if (hoisted) flush_switch();  // a phase switch stays where the schedule has it
    Instruction& in = emit(Instruction::issue);
    in.stream = static_cast<std::uint8_t>(t.stream);
    in.comm = comm;
    in.spec = spec;
    in.dep_comm = dep_comm;
    in.dep_back = dep_back;
    if (hoisted) hoist_last();
    if (t.blocking) {
      Instruction& wait = emit(Instruction::wait);
      wait.comm = comm;
      wait.back = 1;
    } else {
      at(op.group)[static_cast<std::size_t>(t.slot)] = index;
    }
  }

  // Moves the last instruction, a stage-2 issue (ordered after its stage-1 batch only), back to
  // just after its stage-1 issue: over compute, phase switches, waits on other communicators
  // and issues on other streams and communicators (stage 1's back count less one for each issue
  // on its communicator passed), stopping at stage 1, at an issue on its own stream or
  // communicator and at a wait on its communicator. Its batch is the same and waits for the
  // same; only the replay meets it earlier (rank_program.hpp).
  void hoist_last() {
    auto& code = prog_.code;
    Instruction& in = code.back();
    std::size_t to = code.size() - 1;
    for (std::size_t scanned = 0; to > 0 && scanned < kMaxHoist; ++scanned) {
      const Instruction& p = code[to - 1];
      if (p.kind == Instruction::issue) {
        if (p.stream == in.stream || p.comm == in.comm) break;
        if (p.comm == in.dep_comm) {
          if (in.dep_back == 1) break;  // p is stage 1
          --in.dep_back;
        }
      } else if (p.kind == Instruction::wait && p.comm == in.comm) {
        break;
      }
      --to;
    }
    for (auto& w : replica_waits_)
      if (w.instruction >= to) ++w.instruction;
    std::rotate(code.begin() + static_cast<std::ptrdiff_t>(to), code.end() - 1, code.end());
  }

  void wait(const engine::StepOp& op, const engine::OpTraits& t) {
    const int awaited = at(op.group)[static_cast<std::size_t>(t.slot)];
    if (awaited < 0) {
      if (op.op != Op::take_replica)
        throw RuntimeFailure(fmt::format("projection: {} of group {} waits for nothing issued",
                                         engine::op_name(op.op), op.group));
      // Resolved in finish(): the previous step's publish of this group.
      replica_waits_.push_back({prog_.code.size(), op.group, count_});
      emit(Instruction::wait);
      return;
    }
    Instruction& in = emit(Instruction::wait);
    in.comm = issued_[static_cast<std::size_t>(awaited)].comm;
    in.back = back_to(awaited);
  }

  const DurationFn& duration_;
  const BatchFn& batch_;
  bool hoist_stage2_ = false;                                     // GPU machines: see hoist()
  static constexpr std::size_t kMaxHoist = std::size_t{1} << 16;  // instructions scanned back
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

ProgramCompiler::ProgramCompiler(const DurationFn& duration, const BatchFn& batch,
                                 std::vector<Instruction> reuse, bool hoist_stage2)
    : impl_(std::make_unique<Impl>(duration, batch, std::move(reuse), hoist_stage2)) {}

ProgramCompiler::~ProgramCompiler() = default;

void ProgramCompiler::add(const engine::StepOp* ops, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) impl_->add(ops[i]);
}

RankProgram ProgramCompiler::finish() {
  return impl_->finish();
}

RankProgram compile_program(const engine::Schedule& schedule, const DurationFn& duration,
                            const BatchFn& batch, std::vector<Instruction> reuse,
                            bool hoist_stage2) {
  reuse.clear();
  reuse.reserve(schedule.size());
  ProgramCompiler c(duration, batch, std::move(reuse), hoist_stage2);
  c.add(schedule.data(), schedule.size());
  return c.finish();
}

}  // namespace dmuon::project
