#pragma once
// One rank's step schedule (engine/step/step_schedule.hpp) compiled for the replay, read through
// the op table (engine/step/step_op.hpp) as the executor reads it: compute ops become durations on
// the compute stream (consecutive ones merged), issue ops become batches on the stream the
// table gives them (the CUDA backend's: weights, reduce, replicate), waits name the issue
// whose batch they wait for (counting back on its communicator), a blocking issue (the TP exchange)
// is followed at once by its wait, and the phase timer's switches are kept where the executor makes
// them (one engine::PhaseSegmenter). Nothing about the order is decided here: the program is the
// schedule, op for op — but for where a GPU program meets its stage-2 issues (compile_program).

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "dmuon/comm/collective_counters.hpp"
#include "dmuon/engine/step/run_result.hpp"
#include "dmuon/engine/step/step_schedule.hpp"

namespace dmuon::project {

using engine::kStreamCount;
using engine::Stream;

/// The collectives of one batch (one NCCL group / one MPI batch), as issued.
struct BatchSpec {
  struct Call {
    comm::CollectiveKind kind = comm::CollectiveKind::broadcast;
    std::int64_t count = 0;
    std::uint8_t elem_bytes = 4;
    int root = -1;  ///< index in the communicator (broadcast, reduce)
    bool operator==(const Call& o) const {
      return kind == o.kind && count == o.count && elem_bytes == o.elem_bytes && root == o.root;
    }
  };
  engine::CommGroup comm = engine::CommGroup::shard;
  engine::Op op = engine::Op::issue_weights;  ///< the issue op (for consistency checks)
  int group = -1;
  std::vector<Call> calls;
};

/// The calls of an issue op as collectives_of() lists them.
BatchSpec batch_spec(const engine::StepLayout& layout, const engine::StepOp& op,
                     const engine::StepSpec& options);

/// One step of a compiled program. Position-independent: an issue names its batch spec, a wait
/// names the issue it waits for by counting back among this rank's issues on that issue's
/// communicator, so the same run of instructions means the same wherever it sits in a program
/// and whichever rank runs it; that is what lets ranks share them (program_store.hpp).
struct Instruction {
  enum Kind : std::uint8_t { compute, switch_phase, issue, wait };
  Kind kind = compute;
  /// The phase timer switches to `phase` before this instruction runs (always for a
  /// switch_phase, which is kept only where no instruction follows the switch before the next
  /// one: a third of a fine-grained program's instructions were switches).
  bool switches = false;
  std::uint8_t phase = 0;     ///< switches: the engine::Phase the timer switches to
  bool exposed = false;       ///< switches: its time counts as exposed communication
  std::uint8_t stream = 0;    ///< issue: Stream
  std::uint8_t comm = 0;      ///< issue: its engine::CommGroup; wait: the awaited issue's
  std::uint8_t dep_comm = 0;  ///< issue (stage 2): the communicator of the batch it follows
  /// wait: the awaited issue, counted back among the rank's issues on `comm` before this
  /// instruction (1 = the latest; past the step's start for a previous-step wait); 0 = none.
  std::int32_t back = 0;
  /// issue (stage 2): the batch that must end first, counted back on `dep_comm`; 0 = none.
  std::int32_t dep_back = 0;
  double seconds = 0;               ///< compute: on the whole device
  double sm_seconds = 0;            ///< compute: the part that scales with the SMs it gets
  const BatchSpec* spec = nullptr;  ///< issue: the batch it joins (shared between ranks)
  bool operator==(const Instruction& o) const {
    return kind == o.kind && switches == o.switches && phase == o.phase && exposed == o.exposed &&
           stream == o.stream && comm == o.comm && dep_comm == o.dep_comm && back == o.back &&
           dep_back == o.dep_back && seconds == o.seconds && sm_seconds == o.sm_seconds &&
           spec == o.spec;
  }
};

struct RankProgram {
  std::vector<Instruction> code;
  std::int64_t hook_calls = 0;       ///< hook ops per step (hooks that fire)
  std::int64_t hook_comm_calls = 0;  ///< of those, hooks that communicate
};

/// Seconds of a compute op on the whole device, and of those the part that scales with the
/// SMs it gets (compute_contention.hpp; 0 where no contention is modelled).
struct OpSeconds {
  double seconds = 0, sm_seconds = 0;
  OpSeconds(double s = 0, double sm = 0) : seconds(s), sm_seconds(sm) {}  // NOLINT: implicit
};

/// Seconds of a compute op (0 for the others).
using DurationFn = std::function<OpSeconds(const engine::StepOp&)>;
/// The batch an issue op joins; `seq` counts the issues on its communicator within the step.
using BatchFn = std::function<const BatchSpec*(const engine::StepOp&, int seq)>;

/// Compiles a schedule. Throws RuntimeFailure when a wait names a batch nothing issued.
/// `reuse`: storage for the instructions (cleared first), so that compiling many programs
/// allocates once. `hoist_stage2` (GPU machines): each stage-2 issue (HSDP's replicate-group
/// reduction, ordered after its stage-1 batch only) is placed right after its stage-1 issue
/// where nothing on its stream or communicator lies between. The CUDA engine's host enqueues
/// it where the schedule has it, but runs ahead of the device: its batch starts when stage 1
/// ends and its stream is free, whatever the compute stream is doing; the replay, which steps
/// the compute stream (and stops mid-compute while collectives hold SMs), must meet the issue
/// before stage 1 can end to start it then. The same batches, streams and waits.
RankProgram compile_program(const engine::Schedule& schedule, const DurationFn& duration,
                            const BatchFn& batch, std::vector<Instruction> reuse = {},
                            bool hoist_stage2 = false);

/// compile_program fed a block of ops at a time, for a schedule that is streamed
/// (engine::stream_schedule) rather than kept: the same program as compiling the whole list.
/// `duration` and `batch` must outlive it.
class ProgramCompiler {
 public:
  ProgramCompiler(const DurationFn& duration, const BatchFn& batch,
                  std::vector<Instruction> reuse = {}, bool hoist_stage2 = false);
  ~ProgramCompiler();
  ProgramCompiler(const ProgramCompiler&) = delete;
  ProgramCompiler& operator=(const ProgramCompiler&) = delete;
  /// The next `count` ops of the schedule.
  void add(const engine::StepOp* ops, std::size_t count);
  /// Throws RuntimeFailure as compile_program does; call once.
  RankProgram finish();

 private:
  class Impl;  // the compiler's state (rank_program.cpp)
  std::unique_ptr<Impl> impl_;
};

}  // namespace dmuon::project
