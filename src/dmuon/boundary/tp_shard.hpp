#pragma once
// Which dedicated parameters are tensor-parallel (TP) sharded, and along which dimension
// (docs/METRICS.md "Tensor parallelism").
//
// Two rules in the dedication-rule syntax (dedication.hpp) pick them:
//   --tp-shard RULE  the TP-sharded parameters among the dedicated ones (default
//                    kDefaultTpShardRule: the 2-D weights of the column/row-parallel
//                    projections of attention and MLP: q/k/v/o_proj, gate/up/down_proj);
//   --tp-row RULE    among those, the row-parallel ones (default kDefaultTpRowRule: o_proj,
//                    down_proj), sharded along dim 1 (the input features of a PyTorch weight
//                    [out, in]); every other TP-sharded parameter is column-parallel, sharded
//                    along dim 0 (the output features).
// A TP-sharded parameter must be 2-D and its sharded dimension divisible by T; otherwise the
// selection is an InputError naming the parameter. With T = 1 nothing is TP-sharded.

#include <cstdint>
#include <vector>

#include "dmuon/boundary/dedication.hpp"
#include "dmuon/model/module_tree.hpp"

namespace dmuon::boundary {

inline constexpr const char* kDefaultTpShardRule =
    "ndim=2&regex:(.*\\.)?(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)\\.weight";
inline constexpr const char* kDefaultTpRowRule = "regex:(.*\\.)?(o_proj|down_proj)\\.weight";

/// Largest TP group size accepted (checked before anything is sized by it).
inline constexpr int kMaxTp = 1 << 10;

/// Per parameter id: -1 (not TP-sharded), 0 (column-parallel, dim 0) or 1 (row-parallel,
/// dim 1). Only parameters in `dedicated` are considered. Throws InputError for T outside
/// 1..kMaxTp, a matched parameter that is not 2-D, or a sharded dimension not divisible by T.
std::vector<int> select_tp_sharded(const model::ModuleTree& tree, const std::vector<int>& dedicated,
                                   const DedicationRule& shard_rule, const DedicationRule& row_rule,
                                   int tp);

/// The shape one TP rank holds: `shape` with dimension `dim` divided by `tp` (`shape` itself
/// when dim < 0).
std::vector<std::int64_t> tp_local_shape(const std::vector<std::int64_t>& shape, int dim, int tp);

}  // namespace dmuon::boundary
