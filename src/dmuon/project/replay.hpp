#pragma once
// The discrete-event replay of compiled step programs over a modelled world.
//
// Per rank: a compute stream that runs the program in order (compute instructions advance its
// clock; a wait blocks it until the named batch has ended), and the CUDA backend's three
// communication streams, each running its batches in issue order. A batch is ready on a rank
// when that rank's compute stream has reached its issue (stage 2: when the stage-1 batch it
// follows has ended instead: the engine orders it after that batch, not after compute) and
// its stream has finished the batch before; it starts when it is ready on every rank of its
// communicator (NCCL blocks until all have joined), then takes its collectives' latency and
// transfer on the link network (link_network.hpp), sharing bandwidth with every batch in
// flight on the same ports. A step ends, as the engine's end_step() does, when the compute
// stream is done and the weights and reduce streams have drained; the next step starts, as the
// engine's does, from a world barrier: when the last rank has ended the step, every rank starts
// the next one then, and the wait is its step_sync (the barrier itself is modelled as free).
// The replicate stream keeps running: its broadcasts are waited at the next forward.
//
// The programs' run model (WorldPrograms::run_model, engine::StepRunModel) changes three of
// these rules for the reference's DMuon step: no barrier (a rank starts its next step when its
// own has ended, step_sync 0, and waits for late roots in its next forward); a communicator's
// batches start in issue order across its streams (a batch is ready only once the batch issued
// before it on the same communicator instance has ended); a batch's rooted calls pay their
// hop latencies one after another (collective_cost.hpp, batch_time).
//
// On a CPU machine (the host backend over MPI) the rank's core moves the bytes, inside its MPI
// calls, so communication does not overlap its compute: the compute stream waits for every
// batch it issues.
//
// Phases are timed as the CUDA phase timer does: segments of the compute stream between the
// executor's switch points; exposed communication is the sum of the exposed segments.
//
// Rank classes: a class is a set of ranks at the same point of the same chunk of their programs
// (program_store.hpp) with the same state (clock, phase segment, streams, issue counts), so one
// pass through an instruction advances them all. A DMuon rank's program differs from the
// others' only around the parameters it owns: at the end of a chunk the class splits by its
// members' next chunks, and classes that are blocked on the same batch, at the same point, with
// equal state after the wait merge again (at the step barrier too). What differs per rank (the
// phase totals from before a merge, the last step's counters) is kept as a per-rank offset to
// its class's running totals. A traced rank is a class of its own.
//
// Communicators are the groups of the programs' rank grid (WorldPrograms::grid,
// base/rank_grid.hpp). --tp T: the TP group of DP rank dp is ranks dp·T .. dp·T + T − 1 (inside
// one NVLink domain when T divides it, as TP is deployed); its gathers and scatters are
// collectives like any (collective_cost.hpp).

#include <array>
#include <cstdint>
#include <vector>

#include "dmuon/base/trace.hpp"
#include "dmuon/engine/step/run_result.hpp"
#include "dmuon/project/machine_model.hpp"
#include "dmuon/project/world_programs.hpp"

namespace dmuon::project {

struct ReplayResult {
  int steps = 0;
  int world = 0;
  /// ms per step, rank and phase: [(step · world + rank) · kPhaseCount + phase]
  std::vector<double> rank_phases_ms;
  /// Of the last step, per channel (engine::channel_index) and rank: [channel · world + rank]
  std::vector<std::int64_t> calls, bytes;
  /// Of the last step, per channel: the ms with one of its collectives in flight and its
  /// calls' message bytes (comm/bus_bandwidth.hpp), each the max over ranks (engine::KindResult).
  std::array<double, engine::kChannelCount> in_flight_ms{}, message_bytes{};
  std::int64_t batches = 0;         ///< batch instances replayed (all steps)
  std::int64_t rank_classes = 0;    ///< classes formed (the first, splits; all steps)
  std::int64_t rank_class_max = 0;  ///< most classes alive at once
  double phase_ms(int step, int rank, engine::Phase p) const {
    return rank_phases_ms[(static_cast<std::size_t>(step) * static_cast<std::size_t>(world) +
                           static_cast<std::size_t>(rank)) *
                              engine::kPhaseCount +
                          static_cast<std::size_t>(p)];
  }
};

/// How ranks are stepped: in rank classes (the default), or each rank alone (the reference the
/// classes are tested against: the same figures, up to the order of floating-point additions).
enum class ReplayGrouping { rank_classes, per_rank };

/// Replays `steps` consecutive steps of every rank; with a trace, records the timeline of its
/// ranks there (trace.hpp). Throws RuntimeFailure when the programs deadlock (a batch some
/// participant never issues) or, with w.check_batches, when the ranks of a communicator issue
/// different collectives at the same position.
ReplayResult replay(const WorldPrograms& w, const Machine& machine, int steps,
                    Trace* trace = nullptr, ReplayGrouping grouping = ReplayGrouping::rank_classes);

}  // namespace dmuon::project
