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
  };
  std::vector<PendingReplica> replica_waits;  // take_replica before this step's publish
  std::array<int, engine::kCommGroupCount> seq{};
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
        const BatchSpec* spec = batch(op, seq[static_cast<std::size_t>(op.comm)]++);
        if (spec == nullptr || spec->calls.empty())
          throw RuntimeFailure(fmt::format("projection: {} of group {} issues no collective",
                                           engine::op_name(op.op), op.group));
        Instruction in;
        in.kind = Instruction::issue;
        in.stream = static_cast<std::uint8_t>(t.stream);
        in.comm = static_cast<std::uint8_t>(op.comm);
        in.ref = static_cast<std::int32_t>(prog.batches.size());
        if (t.after != BatchSlot::none) in.dep = at(op.group)[static_cast<std::size_t>(t.after)];
        prog.batches.push_back(spec);
        code.push_back(in);
        if (t.blocking) {
          Instruction wait;
          wait.kind = Instruction::wait;
          wait.ref = in.ref;
          code.push_back(wait);
        } else {
          at(op.group)[static_cast<std::size_t>(t.slot)] = in.ref;
        }
        break;
      }
      case engine::OpClass::wait: {
        Instruction in;
        in.kind = Instruction::wait;
        in.ref = at(op.group)[static_cast<std::size_t>(t.slot)];
        if (in.ref < 0) {
          if (op.op != Op::take_replica)
            throw RuntimeFailure(fmt::format("projection: {} of group {} waits for nothing issued",
                                             engine::op_name(op.op), op.group));
          in.previous = true;  // resolved below: the previous step's publish of this group
          replica_waits.push_back({code.size(), op.group});
        }
        code.push_back(in);
        break;
      }
      case engine::OpClass::bookkeeping: break;  // release_weights
    }
  }
  for (const auto& w : replica_waits)  // -1: nothing published, nothing to wait for
    code[w.instruction].ref = at(w.group)[static_cast<std::size_t>(BatchSlot::replica)];
  return prog;
}

}  // namespace dmuon::project
