#pragma once
// DMuon's communication per step under tensor parallelism, layout R x G x T (docs/METRICS.md
// "Tensor parallelism"), as dmuon_inspect shows it. World rank w = dp * T + t (base/rank_grid).
// Predicted by engine/step/step_volume.hpp (StepVolume::tp_exchange; the term in
// volume_terms.hpp).
//
// DP collectives run inside each DP group (the R x G ranks with the same TP index t) exactly as
// without TP (comm_volume.hpp), on the local shard each rank holds: a TP-sharded parameter
// moves |p|/T elements in every broadcast and reduce, the others their full size. So the DP
// volume of world rank w is the owner-based volume (on local shards) of DP rank w / T.
//
// Per TP-sharded parameter p with DP owner rank d and TP owner o, on the TP group of d (world
// ranks d*T + t), after its gradient reduce has landed on d:
//   TP gather   the T local gradient shards to o, grad dtype (e_g bytes/element):
//               rank d*T+t, t != o, sends |p|/T*e_g (its volume); o receives (T-1)/T*|p|*e_g.
//   TP scatter  the fp32 update of the full matrix from o back to the shard holders:
//               rank d*T+t, t != o, receives |p|/T*4 (its volume); o sends (T-1)/T*|p|*4.
// Each is one call on each of the T ranks of that group. Summed over the group each moves
// (T-1)/T*|p| elements. Ranks of other DP groups take no part.

#include <cstdint>
#include <string>
#include <vector>

#include "dmuon/comm/collective_counters.hpp"
#include "dmuon/plan/comm_volume.hpp"
#include "dmuon/plan/plan.hpp"

namespace dmuon::plan {

struct TpCommVolume {
  int tp = 1;
  int world = 1;       ///< R x G x T
  CommVolume dp;       ///< per DP rank (the same for every TP index), local shard sizes
  KindVolume gather;   ///< per world rank: TP gathers of gradients (sent by non-owners)
  KindVolume scatter;  ///< per world rank: TP scatters of fp32 updates (received by non-owners)
  /// Bytes each world rank receives in gathers (the TP owner) and sends in scatters (the TP
  /// owner): the other direction of the two kinds, for the audit of both directions.
  std::vector<std::int64_t> gather_received;
  std::vector<std::int64_t> scatter_sent;
  /// dp.total_bytes(w / T) + gather + scatter volume of world rank w.
  std::int64_t total_bytes(int world_rank) const;
  std::int64_t max_bytes_per_rank() const;
};

/// The first mismatch of world rank `rank`'s TP gathers and scatters of one step (calls, and
/// bytes in both directions) with `v`, as "<what>: measured M, formula F"; "" when they agree.
/// The engine's audit (measured) and the projection's (replayed) both use it.
std::string tp_volume_mismatch(const TpCommVolume& v, int rank, const comm::KindCounters& gather,
                               const comm::KindCounters& scatter);

}  // namespace dmuon::plan
