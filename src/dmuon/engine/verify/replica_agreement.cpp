#include "dmuon/engine/verify/replica_agreement.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "dmuon/base/check.hpp"

namespace dmuon::engine {

ReplicaDivergence replica_divergence(const StepLayout& L, StepBackend& backend, MPI_Comm world) {
  int rank = 0;
  DMUON_CHECK_MPI(MPI_Comm_rank(world, &rank));
  std::vector<std::size_t> offset;
  std::size_t total = 0;
  // --ep: a rank's own experts have no replica in the world (E < G: only in its expert
  // group); the reference checks each rank's against its EP rank's.
  const auto replica = [&L](const ParamLayout& p) {
    return p.storage != Storage::expert && !L.in_expert_group(p);
  };
  for (const auto& p : L.params) {
    if (p.master_offset < 0 || (replica(p) && p.storage != Storage::replicated))
      throw std::logic_error("replica_divergence: the layout is not a full replica");
    offset.push_back(total);
    if (replica(p)) total += static_cast<std::size_t>(p.numel);
  }
  std::vector<float> mine(total), first(total);
  for (std::size_t i = 0; i < L.params.size(); ++i)
    if (replica(L.params[i]))
      backend.read_masters(L.params[i].master_offset, L.params[i].numel, mine.data() + offset[i]);
  if (rank == 0) first = mine;
  const std::size_t max_chunk = std::size_t{1} << 28;  // counts below INT_MAX
  for (std::size_t off = 0; off < total; off += max_chunk)
    DMUON_CHECK_MPI(MPI_Bcast(first.data() + off,
                              static_cast<int>(std::min(max_chunk, total - off)), MPI_FLOAT, 0,
                              world));
  struct {
    double err;
    int index;
  } local{0.0, -1};
  for (std::size_t i = 0; i < L.params.size(); ++i) {
    if (!replica(L.params[i])) continue;
    double diff2 = 0, ref2 = 0;
    for (std::size_t j = offset[i]; j < offset[i] + static_cast<std::size_t>(L.params[i].numel);
         ++j) {
      const double d = static_cast<double>(mine[j]) - first[j];
      diff2 += d * d;
      ref2 += static_cast<double>(first[j]) * first[j];
    }
    double err = diff2 == 0 ? 0.0 : std::sqrt(diff2) / std::max(std::sqrt(ref2), 1e-30);
    if (std::isnan(err)) err = INFINITY;
    if (err > local.err) local = {err, static_cast<int>(i)};
  }
  // The largest error, then the lowest rank holding it (plain MAX / MIN reductions: the GPU
  // check's single-process MPI has no MAXLOC), then that rank's parameter.
  double largest = 0;
  DMUON_CHECK_MPI(MPI_Allreduce(&local.err, &largest, 1, MPI_DOUBLE, MPI_MAX, world));
  int size = 1;
  DMUON_CHECK_MPI(MPI_Comm_size(world, &size));
  int candidate = local.err == largest ? rank : size, holder = 0;
  DMUON_CHECK_MPI(MPI_Allreduce(&candidate, &holder, 1, MPI_INT, MPI_MIN, world));
  int index = rank == holder ? local.index : -1;
  DMUON_CHECK_MPI(MPI_Bcast(&index, 1, MPI_INT, holder, world));
  ReplicaDivergence r;
  r.max_rel_error = largest;
  r.rank = holder;
  if (index >= 0) r.param = L.params[static_cast<std::size_t>(index)].name;
  return r;
}

}  // namespace dmuon::engine
