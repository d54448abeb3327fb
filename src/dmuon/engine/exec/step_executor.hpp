#pragma once
// The one loop that runs a step schedule on a backend: it issues every collective the schedule
// names (collectives_of) on the backend's communicators, keeps the in-flight batches, calls
// the backend's kernels and waits in schedule order, counts hooks and attributes time to
// phases. Host and CUDA runs differ only in the StepBackend they pass.

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dmuon/base/trace.hpp"

#include "dmuon/engine/exec/fault_injection.hpp"
#include "dmuon/engine/exec/in_flight_clock.hpp"
#include "dmuon/engine/exec/step_backend.hpp"
#include "dmuon/engine/exec/step_trace.hpp"

namespace dmuon::engine {

/// What one executed step measured on this rank.
struct StepMeasure {
  std::array<double, kPhaseCount> phases_ms{};
  std::int64_t hook_calls = 0;       ///< hooks that fired
  std::int64_t hook_comm_calls = 0;  ///< of those, hooks that communicated
  /// Per channel: wall ms with one of its collectives in flight (in_flight_clock.hpp), when the
  /// backend observes completion on the host (in_flight_measured); the step's message bytes S
  /// in the nccl-tests sense and the channel's group size (comm/bus_bandwidth.hpp).
  bool in_flight_measured = false;
  std::array<double, kChannelCount> in_flight_ms{};
  std::array<double, kChannelCount> message_bytes{};
  std::array<int, kChannelCount> group_size{};
};

class StepExecutor {
 public:
  /// `inject_nan_step` > 0 poisons the layout's nan_param gradient on the last world rank at
  /// that step (test aid). The layout, schedule and backend must outlive the executor.
  StepExecutor(const StepLayout& layout, const Schedule& schedule, const StepSpec& options,
               StepBackend& backend, int inject_nan_step = -1);
  ~StepExecutor();
  StepExecutor(const StepExecutor&) = delete;
  StepExecutor& operator=(const StepExecutor&) = delete;

  StepMeasure run_step(long step);
  /// Test aid (fault_injection.hpp): when `fault` names this world rank, run_step(fault.step)
  /// throws RuntimeFailure just before that step's first wait, its collectives in flight.
  void inject_fault(const FaultInjection& fault) { fault_ = fault; }
  /// Records this rank's timeline into `trace` from the next step on (dmuon_bench --trace):
  /// phase segments, each compute op and blocked wait, each batch, on the backend's trace
  /// clock (step_trace.hpp: host wall time, CUDA events in stream order).
  void record_into(Trace* trace);
  /// Completes what a step leaves in flight on purpose (HSDP replicate broadcasts, waited at
  /// the next forward): call before reading the masters after the last step.
  void finish();

 private:
  void add_token_exchanges(const StepOp& op);
  void add_pipeline_message(const StepOp& op, const StepSpec& options);
  void transfer(const StepOp& op);
  /// Issues op `op_index`'s collectives as one batch; `mark` (--trace): the stamp taken just
  /// before them.
  comm::Batch issue(std::size_t op_index, std::size_t& mark);
  /// Batch `b`, just issued by op `op_index`, goes in flight (polled, and timed per channel).
  void started(comm::Batch& b, std::size_t op_index);
  /// Waits for `b` (on the backend's terms): it is complete.
  void complete(comm::Batch& b);
  void progress();
  /// The batch slot `slot` of group g (-1: the group-less ops' slots).
  comm::Batch& slot(int g, BatchSlot slot);
  void compute(const StepOp& op, long step);
  void issue_op(std::size_t op_index);
  /// Throws the injected fault when `step` and this rank are the ones it names.
  void throw_injected_fault(long step) const;
  /// --trace: the batch fields of schedule op `op_index` (name, group, bytes).
  TraceSpan batch_fields(std::size_t op_index) const;

  const StepLayout& layout_;
  const Schedule& schedule_;
  StepBackend& backend_;
  int inject_nan_step_;
  bool poisoner_;
  FaultInjection fault_;
  std::vector<std::vector<CollectiveCall>> calls_;  // per schedule op
  // Per group (then one row for the group-less ops): a batch per slot (step_op.hpp).
  std::vector<std::array<comm::Batch, kBatchSlotCount>> slots_;
  std::vector<comm::Batch*> in_flight_;
  bool polls_ = false;
  std::vector<std::uint64_t> channel_mask_;  // per schedule op: the channels its calls use
  std::array<double, kChannelCount> message_bytes_{};
  std::array<int, kChannelCount> group_size_{};
  double pipeline_ms_ = 0;  // --pp: this step's sends and receives so far
  InFlightClock in_flight_clock_;
  std::unique_ptr<WallTraceClock> wall_clock_;  // --trace on a backend without its own clock
  std::unique_ptr<StepTrace> trace_;
};

}  // namespace dmuon::engine
