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

RankProgram compile_program(const engine::Schedule& schedule, const DurationFn& duration,
                            const BatchFn& batch) {
  RankProgram prog;
  using engine::BatchSlot;
  using engine::kBatchSlotCount;
  // Each issue of the step as (communicator, its sequence number there); waits count back.
  struct Issued {
    std::uint8_t comm;
    int seq;
  };
  std::vector<Issued> issued;
  std::array<int, engine::kCommGroupCount> count{};  // issues so far per communicator
  auto back_to = [&](int issue) {
    return count[issued[static_cast<std::size_t>(issue)].comm] -
           issued[static_cast<std::size_t>(issue)].seq;
  };
  // Per group (the clip ops' group -1 is slot row 0): the issue index that last filled a slot.
  std::vector<std::array<int, kBatchSlotCount>> filled;
  auto at = [&](int g) -> std::array<int, kBatchSlotCount>& {
    const auto i = static_cast<std::size_t>(std::max(g, 0));
    if (i >= filled.size()) {
      std::array<int, kBatchSlotCount> none;
      none.fill(-1);
      filled.resize(i + 1, none);
    }
    return filled[i];
  };
  struct PendingReplica {
    std::size_t instruction;
    int group;
    std::array<int, engine::kCommGroupCount> count;  // issues before it, per communicator
  };
  std::vector<PendingReplica> replica_waits;  // take_replica before this step's publish
  engine::PhaseSegmenter segments;
  auto& code = prog.code;
  for (const auto& op : schedule) {
    if (segments.enter(op)) {
      Instruction in;
      in.kind = Instruction::switch_phase;
      in.phase = static_cast<std::uint8_t>(segments.phase());
      in.exposed = segments.exposed();
      code.push_back(in);
    }
    const engine::OpTraits t = engine::op_traits(op.op);
    switch (t.cls) {
      case engine::OpClass::hook:
        ++prog.hook_calls;
        prog.hook_comm_calls += op.communicates ? 1 : 0;
        break;
      case engine::OpClass::compute: {
        const double s = duration(op);
        if (s <= 0) break;
        if (!code.empty() && code.back().kind == Instruction::compute) {
          code.back().seconds += s;
        } else {
          Instruction in;
          in.kind = Instruction::compute;
          in.seconds = s;
          code.push_back(in);
        }
        break;
      }
      case engine::OpClass::issue: {
        const auto c = static_cast<std::size_t>(op.comm);
        const BatchSpec* spec = batch(op, count[c]);
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
            in.dep_comm = issued[static_cast<std::size_t>(dep)].comm;
            in.dep_back = back_to(dep);
          }
        }
        const int index = static_cast<int>(issued.size());
        issued.push_back({in.comm, count[c]++});
        code.push_back(in);
        if (t.blocking) {
          Instruction wait;
          wait.kind = Instruction::wait;
          wait.comm = in.comm;
          wait.back = 1;
          code.push_back(wait);
        } else {
          at(op.group)[static_cast<std::size_t>(t.slot)] = index;
        }
        break;
      }
      case engine::OpClass::wait: {
        Instruction in;
        in.kind = Instruction::wait;
        const int awaited = at(op.group)[static_cast<std::size_t>(t.slot)];
        if (awaited >= 0) {
          in.comm = issued[static_cast<std::size_t>(awaited)].comm;
          in.back = back_to(awaited);
        } else {
          if (op.op != Op::take_replica)
            throw RuntimeFailure(fmt::format("projection: {} of group {} waits for nothing issued",
                                             engine::op_name(op.op), op.group));
          // Resolved below: the previous step's publish of this group.
          replica_waits.push_back({code.size(), op.group, count});
        }
        code.push_back(in);
        break;
      }
      case engine::OpClass::bookkeeping: break;  // release_weights
    }
  }
  // A previous-step wait counts back past this step's start: over the issues before it, then
  // over the previous step's from its last down to the awaited one. Nothing published: none.
  for (const auto& w : replica_waits) {
    const int awaited = at(w.group)[static_cast<std::size_t>(BatchSlot::replica)];
    if (awaited < 0) continue;
    const Issued& i = issued[static_cast<std::size_t>(awaited)];
    Instruction& in = code[w.instruction];
    in.comm = i.comm;
    in.back = w.count[i.comm] + count[i.comm] - i.seq;
  }
  return prog;
}

}  // namespace dmuon::project
