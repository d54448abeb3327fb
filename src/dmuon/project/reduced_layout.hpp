#pragma once
// Rank symmetry for DMuon: the layout of one rank reduced to what makes it differ from the
// others, so that 16,384 ranks of a 45,000-matrix model can each get their own schedule.
//
// In a DMuon layout every rank holds the same groups with the same members; what differs per
// rank is which (site, owner) pairs are rooted in its column (it owns them, or with HSDP keeps
// their master copy) — and only those parameters get optimizer ops, packing and column
// collectives in its schedule. The forward and backward ops of all the other members of a
// site are contiguous compute on the stream, identical on every rank (up to its sample
// count). The reduced layout keeps, per DMuon site, the members of the pairs rooted here with
// their pairs intact, and stands for all the other members with ONE aggregate parameter
// (ReducedLayout::aggregate), so make_schedule() — the engine's own — yields this rank's
// schedule with one forward and one backward op for the aggregate where the full schedule has
// one per member, in the same positions. The non-dedicated FSDP unit is kept whole. Everything
// make_schedule() reads (group kinds, hook flags, weight / gather sizes, which groups have a
// rooted pair or a pooled gradient, the pool windows) is set as make_layout() sets it for this
// rank; the shard-group collectives are taken from a full layout (the reference rank's), which
// the engine guarantees equal on every rank of a row (step_schedule_test), and the column
// collectives come from the reduced layout, whose rooted pairs are complete.
//
// Checked against the full layouts in tests/unit/projection_test.cpp: for every method,
// option and rank of the small topologies, the reduced schedule is the full one with each
// aggregated run of member ops collapsed into one op, and the replay times agree.

#include <cstdint>
#include <vector>

#include "dmuon/engine/step/step_layout.hpp"
#include "dmuon/plan/plan.hpp"

namespace dmuon::project {

struct ReducedLayout {
  engine::StepLayout layout;
  /// Per group of the layout: the index (in layout.params) of its aggregate parameter, or -1.
  std::vector<int> aggregate;
  /// Per parameter of the layout: its index in the reference layout (-1 for an aggregate).
  std::vector<int> reference;
};

/// Builds reduced layouts of any rank from the full layout `reference` of one rank of the same
/// DMuon run, in O(groups + kept parameters + non-dedicated parameters) per rank.
class LayoutReducer {
 public:
  /// Throws std::logic_error for a layout of another method (their layouts differ between
  /// ranks only in offsets: they need no reduction).
  LayoutReducer(const engine::StepLayout& reference, const plan::Plan& plan);
  /// The layout of world rank `rank` (its DP rank's parameters; the TP index only in `me`).
  /// `reuse`: a layout reduce() made before, built over in place (the same result as a fresh
  /// one, without allocating every group's member list again).
  ReducedLayout reduce(int rank, ReducedLayout reuse = {}) const;
  const engine::StepLayout& reference() const { return ref_; }

 private:
  class Reduction;  // one reduce() call's state and stages (reduced_layout.cpp)

  const engine::StepLayout& ref_;
  engine::StepLayout shell_;  // the reference without parameters, pairs, groups and arenas
  std::vector<engine::GroupLayout> group_shells_;  // its groups without members and pairs
  std::vector<engine::ParamLayout> nameless_;      // the reference's parameters without names
  std::vector<int> position_;                      // of each parameter in its group
  std::vector<std::int64_t>
      group_pair_numel_;  // per group: numel of its pooled pairs (not --route dtype)
  std::vector<std::vector<int>> pairs_of_column_;  // pair indices by owner column
  std::vector<std::size_t> members_of_column_;     // parameters of those pairs
  std::size_t unit_params_ = 0;                    // parameters of the groups kept whole
};

/// True when `p` is an aggregate parameter of a reduced layout.
inline bool is_aggregate(const engine::ParamLayout& p) {
  return p.pid < 0;
}

}  // namespace dmuon::project
