#pragma once
// The owner-based routes' communication per step (SPEC §6) as the plan record and dmuon_inspect
// show it: collective counts and per-rank volume of the owners' broadcasts and reduces, and the
// dedicated bytes they move. Predicted by engine/step/step_volume.hpp (predict_step_volume,
// StepVolume::owners) from the terms of plan/volume_terms.hpp.
//
// Volume convention (algorithm-independent payload): a broadcast counts its bytes on every
// receiving rank; a reduce counts its bytes on every sending (non-root) rank. So with P_M the
// dedicated bytes and own_r what rank r owns, 1-D Z3 moves 3·(P_M − own_r) per rank per step,
// which is SPEC §6's 3(N−1)/N·P_M for balanced owners.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dmuon/boundary/hook_plan.hpp"
#include "dmuon/model/module_tree.hpp"
#include "dmuon/partition/partition.hpp"
#include "dmuon/plan/reshard.hpp"

namespace dmuon::plan {

/// How a site's gradients travel to their owner. per_param is the reference (SPEC §6: one
/// reduce per parameter); packed sends one reduce per (site, owner) over the owner's packed
/// gradient buffer: the same bytes in fewer, larger messages (the layout the broadcasts use).
enum class GradReduce { per_param, packed };
const char* grad_reduce_name(GradReduce g);
/// "per-param" | "packed"; throws InputError otherwise.
GradReduce parse_grad_reduce(std::string_view s);

/// Per-step counts and bytes of one collective kind.
struct KindVolume {
  std::vector<std::int64_t> calls_per_rank;  ///< collectives each world rank takes part in
  std::vector<std::int64_t> bytes_per_rank;  ///< volume per world rank (convention above)
  std::int64_t max_calls() const;
  std::int64_t max_bytes() const;
};

/// Per DP rank, one step (Z3 and --accum already applied). dmuon: broadcasts in rows, reduces
/// to the owner's column, HSDP's stage 2 and replicate broadcast; ddp-dmuon: reduce to the owner
/// and its post-step fp32 broadcast over the world (the HSDP kinds stay zero, no hooks).
struct CommVolume {
  Reshard reshard = Reshard::z3;
  int world = 1;  ///< R x G (the DP ranks)
  GradReduce grad_reduce = GradReduce::per_param;
  /// Hooks that fire per rank per step: the reference installs four per site in Z3 and Z2
  /// alike (forward-pre, forward-post, backward-pre, backward-post): 4 per site.
  std::int64_t hooks_fired = 0;
  /// Hooks among those that issue or complete a collective, per rank per step: Z3 3 per site
  /// (forward-pre broadcast, backward-pre re-broadcast, backward-post reduce; forward-post
  /// only frees), Z2 2 per site (forward-pre broadcast, backward-post reduce).
  std::int64_t hooks_communicating = 0;
  /// The sites those hooks are installed at: the plan's, and (--ep E < G) the expert groups'
  /// owner-based sites.
  std::int64_t hook_sites = 0;
  KindVolume broadcast;      ///< packed weight broadcasts (rows), per (site, owner)
  KindVolume reduce;         ///< gradient reduces to the owner's column (the owner in 1-D): stage 1
  KindVolume reduce_stage2;  ///< HSDP only: inside the owner's column
  KindVolume replicate_broadcast;         ///< HSDP only: updated fp32 master inside the column
  std::int64_t dedicated_bytes = 0;       ///< P_M in bytes
  std::vector<std::int64_t> owned_bytes;  ///< per rank
  /// The largest dedicated parameter (name, wire bytes): what an overflow message names.
  std::string largest_name;
  std::int64_t largest_bytes = 0;
  /// Notes a dedicated parameter's wire bytes for largest_name/largest_bytes.
  void note_param(const std::string& name, std::int64_t bytes) {
    if (bytes <= largest_bytes && !largest_name.empty()) return;
    largest_name = name;
    largest_bytes = bytes;
  }
  /// "... overflows 64 bits ..." for `what` (a kind, or "" for the total) of `rank`, naming the
  /// largest dedicated parameter and the limit.
  std::string overflow_message(const char* what, int rank) const;
  std::int64_t max_bytes_per_rank() const;
  /// Sum over the kinds for one rank (fits: predict_step_volume checks every rank's total).
  std::int64_t total_bytes(int rank) const;
};

/// Which packed buffer of its (site, owner) a dedicated parameter joins: 0 the common one, else
/// its route's type when that differs from the weights' wire type or the gradients' reduce type
/// (one more buffer per such type).
inline int packed_type_key(const std::vector<int>* route_wire_bytes, int pid, int wire_bytes,
                           int reduce_bytes) {
  const int route = route_wire_bytes ? route_wire_bytes->at(static_cast<std::size_t>(pid)) : 0;
  return route > 0 && (route != wire_bytes || route != reduce_bytes) ? route : 0;
}

}  // namespace dmuon::plan
