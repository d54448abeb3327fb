#pragma once
// Predicted per-step communication of the `--route RULE=sharded_adamw` parameters under
// --method dmuon (param_route.hpp, docs/METRICS.md "DMuon on DDP and parameter routes").
//
// Each such parameter p (n elements) is its own flat buffer sharded over the shard group of G
// ranks, padded to c = ceil(n / G) elements per rank; with e wire bytes per element (the
// engine's --comm-dtype, else the parameter's dtype), per rank per step:
//   all_gather      (Z3: 2, Z2: 1) × K calls, each e·(G−1)·c bytes (forward at its site; Z3
//                   again before that site's backward; K = --accum micro-steps)
//   reduce_scatter  1 call, e·(G−1)·c bytes, deferred to the end of backward (AVG)
//   all_reduce      HSDP (R > 1), replicate group: 1 call, e·⌊c·(R−1)/R⌋ bytes (AVG)
// under the counter convention of comm/collective_counters.hpp. Every rank moves the same.

#include <cstdint>

#include <nlohmann/json.hpp>

#include "dmuon/model/module_tree.hpp"
#include "dmuon/plan/comm_volume.hpp"
#include "dmuon/plan/plan.hpp"

namespace dmuon::plan {

struct ShardedAdamwVolume {
  std::int64_t params = 0;    ///< parameters on route sharded_adamw
  std::int64_t sites = 0;     ///< their boundary-rule sites (Plan::sharded_hooks)
  std::int64_t elements = 0;  ///< their elements (unpadded)
  KindVolume all_gather;      ///< shard group
  KindVolume reduce_scatter;  ///< shard group, after the last backward op
  KindVolume all_reduce;      ///< replicate group (HSDP only)
};

/// The sharded_adamw traffic of one step of `plan` on its R × G world. Bytes per element: a
/// route's dtype, else `wire_bytes` when > 0, else each parameter's dtype. Checked arithmetic
/// (InputError naming the parameter on overflow).
ShardedAdamwVolume predict_sharded_adamw_volume(const model::ModuleTree& tree, const Plan& plan,
                                                Reshard reshard, int wire_bytes = 0, int accum = 1);

/// {"params", "sites", "elements", "all_gather" | "reduce_scatter" | "replicate_all_reduce":
/// {"calls_per_rank", "bytes_per_rank"} (the same on every rank)}.
nlohmann::json sharded_adamw_volume_to_json(const ShardedAdamwVolume& v);

}  // namespace dmuon::plan
