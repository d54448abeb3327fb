#pragma once
// Ownership partition (SPEC §5): which slot (shard s, replicate r) owns each dedicated
// parameter, and how good that assignment is.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dmuon/model/module_tree.hpp"
#include "dmuon/partition/cost_model.hpp"

namespace dmuon::partition {

enum class Strategy {
  lpt,          ///< the reference longest-processing-time greedy, reproduced exactly
  round_robin,  ///< units in model order, slot = counter mod #slots (counter = unit index);
                ///< with max_owners_per_group k, a unit whose key already uses k slots goes
                ///< to the key's slots (slot order) at index counter mod k
  rank0,        ///< everything on slot (0, 0)
  lpt_refine,   ///< ours: reference LPT, then deterministic move/swap local search
};
const char* strategy_name(Strategy s);
/// "lpt" | "round_robin" (or "round-robin") | "rank0" | "lpt_refine" (or "lpt-refine").
Strategy parse_strategy(std::string_view s);

/// What buckets the units (SPEC §5 "group key"; the reference's assignment_group_key_fn).
enum class GroupKey {
  layer,  ///< layer_key(name), the reference's default: names without layers.N/blocks.N all
          ///< fall in one "none" bucket
  site,   ///< the parameter's hook site (its module path): packing and same-key spreading
          ///< follow the chosen boundary, also where the names carry no layer key
};
const char* group_key_name(GroupKey k);
/// "layer" | "site"; InputError otherwise.
GroupKey parse_group_key(std::string_view s);

/// Most slots (G × R) a partition accepts: checked before anything is sized by it.
inline constexpr std::int64_t kMaxSlots = std::int64_t{1} << 20;

struct PartitionOptions {
  Strategy strategy = Strategy::lpt;
  CostModel cost_model = CostModel::optimizer;
  bool pack = true;  ///< merge a bucket's small parameters into one unit
  /// numel below which a parameter is "small" (0: none is, no packing, as pack = false)
  std::int64_t pack_threshold = 5'000'000;
  int max_owners_per_group = 0;  ///< 0 = unlimited (lpt, lpt_refine, round_robin)
  int shard = 1;                 ///< G, shard-group size
  int replicate = 1;             ///< R, replicate-group size (HSDP when > 1)
  bool column_balance = true;    ///< HSDP: balance per-column loads first
  /// Parameter ids never packed, ascending (TP-sharded parameters: tp_owners.hpp).
  std::vector<int> never_pack;
  GroupKey group_key = GroupKey::layer;
  /// GroupKey::site: per parameter id, the key (its hook site's path; plan.cpp fills it).
  /// Read by build_units only; a Partition's copy of the options has it empty.
  std::vector<std::string> site_keys;
};

/// "on (< 5000000)" or "off": the packing rule as the tools' headers print it.
std::string packing_text(const PartitionOptions& o);

/// One owner position. Slots are ordered shard-major: index = shard * R + replicate.
struct Slot {
  int shard = 0;
  int replicate = 0;
  int rank = 0;  ///< world rank = replicate * G + shard
};

/// What the partitioner assigns: one parameter, or a bucket's small parameters packed.
struct Unit {
  std::optional<std::string> key;  ///< group key (GroupKey); nullopt is the "none" bucket
  std::vector<int> members;        ///< parameter ids, model order
  std::int64_t numel = 0;
  std::int64_t cost = 0;
  bool packed() const { return members.size() > 1; }
};

struct Partition {
  PartitionOptions options;
  std::vector<Slot> slots;
  std::vector<Unit> units;     ///< model order (by first member)
  std::vector<int> unit_slot;  ///< per unit
  /// Unit indices in the order the strategy assigned owners (LPT: its sorted order; the
  /// others: model order). A strict boundary error names its first uncovered parameter here.
  std::vector<int> visit_order;
  std::vector<int> owner_slot;           ///< per parameter id; -1 when not dedicated
  std::vector<std::int64_t> param_cost;  ///< per parameter id; 0 when not dedicated

  // Quality (SPEC §5).
  std::vector<std::int64_t> numel_loads;  ///< per slot
  std::vector<std::int64_t> cost_loads;   ///< per slot
  std::int64_t total_cost = 0;
  std::int64_t largest_unit_cost = 0;
  std::int64_t makespan = 0;  ///< max cost load
  double lower_bound = 0;     ///< max(largest unit cost, total cost / #slots)
  double ratio = 0;           ///< makespan / lower bound (1 is optimal)
  /// Also valid and never looser: max(lower_bound, c[S-1] + c[S]) with c the unit costs sorted
  /// descending (S+1 units on S slots put two of the S+1 largest together).
  double tight_lower_bound = 0;
  double tight_ratio = 0;         ///< makespan / tight_lower_bound
  double imbalance_all = 0;       ///< (max - min) / max of numel loads, every slot
  double imbalance_nonempty = 0;  ///< the same over non-empty slots (the reference's)
  int empty_slots = 0;
  int packed_units = 0;
  int key_collisions = 0;  ///< units sharing a slot with an earlier same-key unit

  int owner_rank(int param) const {
    return slots.at(static_cast<std::size_t>(owner_slot.at(static_cast<std::size_t>(param)))).rank;
  }
};

/// Parameter ids in the order owners are assigned: units in visit_order, members in model
/// order.
std::vector<int> parameter_visit_order(const Partition& p);

/// Builds the units of the dedicated parameters (SPEC §5 "Units"). Unit numel is the unclamped
/// element count (0 for a zero-size parameter); sums are checked (InputError on overflow).
std::vector<Unit> build_units(const model::ModuleTree& tree, const std::vector<int>& dedicated,
                              const PartitionOptions& options);

/// Partitions the dedicated parameters over G × R slots. Deterministic: the same inputs give
/// the same owners on every rank and every run. Throws InputError for a G, R or G × R out of
/// range (1..kMaxSlots) and when the total cost or numel of the units overflows int64 (every
/// load is then a sum of a subset and cannot overflow).
Partition partition_ownership(const model::ModuleTree& tree, const std::vector<int>& dedicated,
                              const PartitionOptions& options);

/// Recomputes the quality metrics of `p` from its unit_slot (used after any reassignment).
void compute_metrics(Partition& p);

}  // namespace dmuon::partition
