#pragma once
// What a run reports, collected around the executor: per step, this rank's phase times, hook
// calls and collective counters per channel, each audited against the exact formula
// (step_volume.hpp) as it is recorded; at the end, the reductions over ranks (per step the
// max over ranks, then the median over measured steps), memory figures and, when asked, the
// final weights on rank 0 and the --check against the one-process reference. The reductions
// run on the world communicator, outside the counted ones.

#include <mpi.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "dmuon/comm/unique_comm.hpp"
#include "dmuon/engine/exec/channel_counters.hpp"
#include "dmuon/engine/exec/step_backend.hpp"
#include "dmuon/engine/exec/step_executor.hpp"
#include "dmuon/engine/step/engine_options.hpp"
#include "dmuon/engine/step/run_result.hpp"
#include "dmuon/engine/step/step_layout.hpp"
#include "dmuon/engine/step/step_volume.hpp"
#include "dmuon/model/module_tree.hpp"
#include "dmuon/plan/plan.hpp"

namespace dmuon::engine {

class ResultCollector {
 public:
  /// `tree` is the logical model (with --tp, the layout holds its local shards); collective
  /// over `world` (with --tp it splits the DP groups the check gathers over).
  ResultCollector(const model::ModuleTree& tree, const plan::Plan& plan, const StepLayout& layout,
                  const EngineOptions& o, MPI_Comm world);

  /// This rank's measures of step `step` (1-based, warmup included) and what it moved on each
  /// communicator in that step (the difference of two snapshots).
  void record(long step, const StepMeasure& m, const ChannelCounters& moved);

  /// Collective over the world: the run's result (every rank gets the reductions; rank 0 the
  /// per-rank arrays and, with o.check or o.keep_final_weights, the final weights).
  RunResult finish(StepBackend& backend);

 private:
  std::vector<std::vector<float>> gather_final(StepBackend& backend);
  void gather_per_rank(RunResult& r) const;
  void reduce_phases(RunResult& r) const;
  void reduce_channels(RunResult& r) const;
  void reduce_counts(RunResult& r) const;
  void check(RunResult& r, StepBackend& backend);
  /// --ep: the part of each routed expert's parameter this rank holds (begin -1: none).
  struct HeldSpan {
    std::int64_t begin = -1;
    std::vector<float> values;
  };
  std::vector<HeldSpan> own_experts(StepBackend& backend) const;
  std::string check_note(std::int64_t excused, bool sixteen_bit_muon) const;

  const model::ModuleTree& tree_;
  model::ModuleTree local_;  // the layout's tree (TP: the local shards)
  const plan::Plan& plan_;
  const StepLayout& layout_;
  EngineOptions o_;
  MPI_Comm world_;
  comm::UniqueComm dp_split_;  // --tp: this rank's DP group (the ranks of its TP index)
  MPI_Comm dp_;                // the DP group (the world without --tp)
  int rank_ = 0, size_ = 1;
  VolumeExpectation expect_{};                               // the formula's channels
  std::int64_t hooks_formula_ = 0, comm_hooks_formula_ = 0;  // and hooks, per step
  std::int64_t sites_formula_ = 0;  // the plan's hook sites (+ --ep E < G's expert sites)
  std::vector<double> phases_;      // step-major, kPhaseCount per step
  std::vector<double> in_flight_;   // step-major, kChannelCount per step
  bool in_flight_measured_ = false;
  std::array<double, kChannelCount> message_bytes_{};
  std::array<int, kChannelCount> group_size_{};
  std::array<std::int64_t, kChannelCount> calls_{}, bytes_{};  // of the last step
  std::int64_t hooks_per_step_ = 0, comm_hooks_per_step_ = 0;
  std::string audit_message_;
};

}  // namespace dmuon::engine
