#pragma once
// Strategy implementations behind partition_ownership(); each fills Partition::unit_slot.

#include <string>
#include <vector>

#include "dmuon/partition/partition.hpp"

namespace dmuon::partition::detail {

/// The reference LPT greedy (SPEC §5), exactly: units sorted by (−cost, −numel, key, names),
/// each to the candidate slot minimising (key already there, [column cost], cost,
/// [column numel], numel), ties to the earliest slot. O(U log S + U·k) with k the slots a
/// key already uses. With prefer_spread = false the same-key criterion is dropped (plain LPT,
/// used as a second start by lpt_refine).
void assign_lpt(Partition& p, const std::vector<std::string>& unit_names, bool prefer_spread);

/// Our improvement: start from reference LPT, then move or swap units off the most loaded
/// slot while that strictly lowers (makespan, #slots at makespan); a move that would add a
/// same-key collision is taken only when no collision-free improvement exists.
void refine_local_search(Partition& p);

}  // namespace dmuon::partition::detail
