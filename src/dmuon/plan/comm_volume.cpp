#include "dmuon/plan/comm_volume.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "dmuon/base/abbreviate.hpp"
#include "dmuon/base/checked_int.hpp"
#include "dmuon/base/error.hpp"

namespace dmuon::plan {

const char* grad_reduce_name(GradReduce g) {
  return g == GradReduce::per_param ? "per-param" : "packed";
}

GradReduce parse_grad_reduce(std::string_view s) {
  if (s == "per-param" || s == "per_param") return GradReduce::per_param;
  if (s == "packed") return GradReduce::packed;
  throw InputError(fmt::format("unknown gradient reduce mode '{}' (valid: per-param, packed)",
                               abbreviate_value(s)));
}

std::int64_t KindVolume::max_calls() const {
  return calls_per_rank.empty() ? 0
                                : *std::max_element(calls_per_rank.begin(), calls_per_rank.end());
}
std::int64_t KindVolume::max_bytes() const {
  return bytes_per_rank.empty() ? 0
                                : *std::max_element(bytes_per_rank.begin(), bytes_per_rank.end());
}

std::string CommVolume::overflow_message(const char* what, int rank) const {
  return fmt::format(
      "predicted {}{}volume of rank {} per step overflows 64 bits (limit: 2^63-1 bytes per rank "
      "per step; the largest dedicated parameter is '{}', {} bytes on the wire)",
      what, *what ? " " : "", rank, abbreviate_value(largest_name), largest_bytes);
}

std::int64_t CommVolume::total_bytes(int rank) const {
  std::int64_t t = 0;
  for (const KindVolume* k : {&broadcast, &reduce, &reduce_stage2, &replicate_broadcast})
    t = checked_add(t, k->bytes_per_rank.at(static_cast<std::size_t>(rank)),
                    [&] { return overflow_message("", rank); });
  return t;
}

std::int64_t CommVolume::max_bytes_per_rank() const {
  std::int64_t m = 0;
  for (int r = 0; r < world; ++r) m = std::max(m, total_bytes(r));
  return m;
}

CommVolume predict_dmuon_volume(const model::ModuleTree& tree, const boundary::HookPlan& plan,
                                const partition::Partition& part, Reshard reshard,
                                GradReduce grad_reduce, int wire_bytes,
                                const std::vector<std::int64_t>* local_numel,
                                const std::vector<int>* route_wire_bytes) {
  const int G = part.options.shard, R = part.options.replicate;
  CommVolume v;
  v.reshard = reshard;
  v.grad_reduce = grad_reduce;
  const bool packed = grad_reduce == GradReduce::packed;
  v.world = G * R;
  for (KindVolume* k : {&v.broadcast, &v.reduce, &v.reduce_stage2, &v.replicate_broadcast}) {
    k->calls_per_rank.assign(static_cast<std::size_t>(v.world), 0);
    k->bytes_per_rank.assign(static_cast<std::size_t>(v.world), 0);
  }
  v.owned_bytes.assign(static_cast<std::size_t>(v.world), 0);
  const auto sites = static_cast<std::int64_t>(plan.sites.size());
  v.hooks_fired = 4 * sites;
  v.hooks_communicating = (reshard == Reshard::z3 ? 3 : 2) * sites;
  const int fwd_broadcasts = reshard == Reshard::z3 ? 2 : 1;

  // Per-column and per-rank totals first: every rank's volume is "all minus what its column
  // (or itself) owns", so the prediction is O(params + ranks), not O(params x ranks).
  std::int64_t pairs = 0, params = 0;  // (site, owner) buffers; dedicated parameters
  std::vector<std::int64_t> col_pairs(G, 0), col_params(G, 0);
  std::vector<std::int64_t> col_bytes(G, 0), col_master(G, 0);  // param dtype; fp32 master
  std::vector<std::int64_t> rank_bytes(v.world, 0), rank_master(v.world, 0);
  std::int64_t total_master = 0;
  for (const auto& site : plan.sites) {
    // (owner slot, type key): the packed buffers of this site.
    std::map<std::pair<int, int>, char> owners;
    for (int pid : site.params) {
      const auto& prm = tree.parameter(pid);
      const auto overflow = [&] {
        return fmt::format("predicted volume overflows 64 bits at dedicated parameter '{}'",
                           prm.name);
      };
      const std::int64_t numel =
          local_numel ? local_numel->at(static_cast<std::size_t>(pid)) : prm.numel();
      const std::int64_t bytes = checked_mul(
          dedicated_wire_bytes(route_wire_bytes, pid, wire_bytes, model::dtype_size(prm.dtype)),
          numel, overflow);
      const std::int64_t master = checked_mul(4, numel, overflow);
      v.note_param(prm.name, bytes);
      const auto& owner = part.slots[part.owner_slot[pid]];
      owners[{part.owner_slot[pid], packed_type_key(route_wire_bytes, pid, wire_bytes)}] = 1;
      ++params;
      ++col_params[owner.shard];
      // Column and rank sums are parts of the checked totals below.
      v.dedicated_bytes = checked_add(v.dedicated_bytes, bytes, overflow);
      total_master = checked_add(total_master, master, overflow);
      col_bytes[owner.shard] += bytes;
      col_master[owner.shard] += master;
      rank_bytes[owner.rank] += bytes;
      rank_master[owner.rank] += master;
    }
    for (const auto& o : owners) {
      ++pairs;
      ++col_pairs[part.slots[o.first.first].shard];
    }
  }
  v.owned_bytes = rank_bytes;
  for (int rank = 0; rank < v.world; ++rank) {
    const int s = rank % G;
    // Forward (and Z3 pre-backward) broadcasts inside each row, rooted in the owner's column.
    v.broadcast.calls_per_rank[rank] = fwd_broadcasts * pairs;
    v.broadcast.bytes_per_rank[rank] =
        checked_mul(fwd_broadcasts, v.dedicated_bytes - col_bytes[s],
                    [&] { return v.overflow_message("broadcast", rank); });
    // Stage 1 (the only stage in 1-D): reduce inside the row to the owner's column.
    v.reduce.calls_per_rank[rank] = packed ? pairs : params;
    v.reduce.bytes_per_rank[rank] = v.dedicated_bytes - col_bytes[s];
    if (R > 1) {
      // Stage 2 inside the owner's column to the owner's row; then the updated fp32 master
      // goes back out inside that column.
      v.reduce_stage2.calls_per_rank[rank] = packed ? col_pairs[s] : col_params[s];
      v.reduce_stage2.bytes_per_rank[rank] = col_bytes[s] - rank_bytes[rank];
      v.replicate_broadcast.calls_per_rank[rank] = col_pairs[s];
      v.replicate_broadcast.bytes_per_rank[rank] = col_master[s] - rank_master[rank];
    }
  }
  for (int rank = 0; rank < v.world; ++rank) (void)v.total_bytes(rank);  // throws on overflow
  return v;
}

}  // namespace dmuon::plan
