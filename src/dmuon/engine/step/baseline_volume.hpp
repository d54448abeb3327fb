#pragma once
// Exact per-rank, per-step collective calls and bytes every method must produce, under the
// counter convention of comm/collective_counters.hpp (broadcast/all_gather count received
// bytes, reduce/reduce_scatter/all_reduce sent bytes), per channel (shard or replicate group,
// run_result.hpp). The engine audits its measured counters against these integers. For
// `dmuon` the broadcast/reduce part is plan::predict_dmuon_volume (SPEC §6); the sharded
// non-dedicated parameters add the FSDP terms below.
//
// Per parameter of numel n, chunk c = ceil(n / G) elements (shards padded to G·c), e bytes per
// element on the wire (4 for fp32, 2 for bf16: the parameter's --route dtype, else
// --comm-dtype; owner-based parameters always --comm-dtype), in the shard group (a row of G
// ranks):
//   FSDP forward all_gather   (G−1)·c·e bytes, once (Z2) or twice (Z3: re-gather for backward)
//   FSDP backward reduce_scatter(avg)  (G−1)·c·e
//   fsdp-muon optimizer all_gather of the dedicated parameter's Nesterov input  (G−1)·c·e
//     (not for a parameter routed to adamw: --route, plan/param_route.hpp)
// and with HSDP (R > 1) in the replicate group (a column of R ranks):
//   FSDP gradient-shard all_reduce(avg)  floor(c·(R−1)/R)·e
// ddp-muon ignores the layout (every rank holds everything): over all N = R·G ranks,
//   all_reduce(avg)  floor(n·(N−1)/N)·e
// ddp-dmuon: the same all_reduce for the non-dedicated parameters; the dedicated ones reduce to
// their owner and come back in the post-step broadcast (plan/ddp_dmuon_volume.hpp).
// dmuon's --route sharded_adamw parameters: the same FSDP terms, from
// plan/sharded_adamw_volume.hpp (their reduce-scatter runs at the end of backward).
// --accum K (accumulation.hpp): every weight collective (dmuon's row broadcasts, the FSDP
// forward/backward all-gathers) × K; gradient reduces, HSDP stage 2, fsdp-muon's optimizer
// all-gather and the replicate broadcast × 1.
// --clip-norm (grad_clip.hpp): + 1 all_reduce of one fp32 over the world (`world_all_reduce`),
// floor(1·(N−1)/N)·4 = 0 bytes under the convention.

#include <array>
#include <cstdint>

#include "dmuon/comm/collective_counters.hpp"
#include "dmuon/engine/step/engine_options.hpp"
#include "dmuon/engine/step/run_result.hpp"
#include "dmuon/plan/comm_volume.hpp"
#include "dmuon/plan/plan.hpp"

namespace dmuon::engine {

struct KindExpectation {
  std::int64_t calls = 0;
  std::int64_t bytes = 0;  ///< volume under the convention
};
/// By channel_index(group, kind).
using VolumeExpectation = std::array<KindExpectation, kChannelCount>;

/// Elements per rank of a parameter sharded over G ranks.
inline std::int64_t shard_chunk(std::int64_t numel, int shard) {
  return (numel + shard - 1) / shard;
}

/// Expected calls and bytes of world rank `rank` per step in a world of `replicate` rows of
/// `shard` ranks. `dmuon` is the prediction for the plan (used for method dmuon only).
VolumeExpectation expected_volume(Method method, plan::Reshard reshard,
                                  const model::ModuleTree& tree, const plan::Plan& plan,
                                  const plan::CommVolume& dmuon, int rank, int shard, int replicate,
                                  int wire_bytes = 4, int accum = 1, bool clip = false);

}  // namespace dmuon::engine
