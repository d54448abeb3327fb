#pragma once
// The tensor-parallel (TP) owner pass (docs/METRICS.md "Tensor parallelism"): which rank of
// the DP owner's TP group gathers a TP-sharded parameter's gradient, runs Newton-Schulz on
// the full logical matrix and scatters the update back.
//
// Layout R x G x T, TP fastest: world rank = dp_rank * T + tp_rank with dp_rank = replicate * G
// + shard (Slot::rank, unchanged from the 1-D / HSDP numbering). A DP owner slot's TP group is
// the T world ranks slot.rank * T + t.
//
// The pass runs after the DP owners (the reference's order): parameters are visited in the DP
// partition's visiting order (parameter_visit_order), the non-TP-sharded ones skipped. Each
// TP-sharded parameter goes to the TP rank t of its DP owner slot s with the least
//   (cost load of (s, t), numel load of (s, t), rotation (t - offset(s)) mod T)
// where the loads count only the TP-sharded parameters assigned so far (cost = the
// partition's cost of the logical parameter, numel = logical numel) and
//   offset(s) = (shard * R + replicate) mod T   under HSDP (R > 1),
//   offset(s) = dp_owner mod T                  in 1-D (dp_owner = the slot's DP rank = shard),
// so ties rotate across DP owners instead of piling on TP rank 0.

#include <cstdint>
#include <vector>

#include "dmuon/model/module_tree.hpp"
#include "dmuon/partition/partition.hpp"

namespace dmuon::partition {

struct TpPlan {
  int tp = 1;                             ///< T, the TP group size
  std::vector<int> sharded;               ///< TP-sharded parameter ids, model order
  std::vector<int> shard_dim;             ///< per parameter id: -1, 0 (column) or 1 (row)
  std::vector<std::int64_t> local_numel;  ///< per parameter id: numel/T if TP-sharded, else numel
  std::vector<int> tp_owner;              ///< per parameter id: TP rank, -1 if not TP-sharded
  std::vector<int> visit_order;           ///< TP-sharded ids in the order the pass assigned them
  std::vector<std::int64_t> cost_loads;   ///< per (slot, TP rank): index slot * T + t
  std::vector<std::int64_t> numel_loads;  ///< the same, logical numel

  bool is_sharded(int pid) const { return shard_dim.at(static_cast<std::size_t>(pid)) >= 0; }
  /// World rank running Newton-Schulz for a TP-sharded parameter: dp owner rank * T + tp owner.
  int owner_world_rank(const Partition& part, int pid) const {
    return part.owner_rank(pid) * tp + tp_owner.at(static_cast<std::size_t>(pid));
  }
};

/// The rotation offset of DP owner slot `slot` (see above).
int tp_rotation_offset(const Partition& part, int slot, int tp);

/// Runs the TP owner pass. `shard_dim` is select_tp_sharded's result (per parameter id);
/// a TP-sharded parameter must be owned in `part`. T = 1 gives an empty pass.
TpPlan assign_tp_owners(const model::ModuleTree& tree, const Partition& part,
                        const std::vector<int>& shard_dim, int tp);

}  // namespace dmuon::partition
