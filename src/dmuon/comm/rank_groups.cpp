#include "dmuon/comm/rank_groups.hpp"

#include <fmt/format.h>

#include "dmuon/base/check.hpp"

namespace dmuon::comm {

RankGroups::RankGroups(MPI_Comm world, const RankGrid& grid, MPI_Comm pipeline)
    : grid_(grid), world_(world), pipeline_(pipeline) {
  int size = 0;
  DMUON_CHECK_MPI(MPI_Comm_rank(world, &world_rank_));
  DMUON_CHECK_MPI(MPI_Comm_size(world, &size));
  DMUON_REQUIRE(size == grid.world(),
                fmt::format("rank grid R={} x G={} x T={} needs {} ranks, the world has {}",
                            grid.replicate, grid.shard, grid.tp, grid.world(), size));
  for (CommGroup g : kAllCommGroups) {
    if (g == CommGroup::world || g == CommGroup::pipeline) continue;
    // The expert group exists to communicate only with --ep E < G (the same test on every rank).
    if (g == CommGroup::expert && !grid.has_expert_groups()) continue;
    // The EP group (the routed tokens' all-to-alls) only with --ep E > 1.
    if (g == CommGroup::ep && grid.ep == 1) continue;
    MPI_Comm part = MPI_COMM_NULL;
    DMUON_CHECK_MPI(
        MPI_Comm_split(world, grid.instance(world_rank_, g), grid.member(world_rank_, g), &part));
    split_[static_cast<std::size_t>(g)] = UniqueComm(part);
  }
}

MPI_Comm RankGroups::comm(CommGroup g) const {
  if (g == CommGroup::pipeline) return pipeline_;
  return g == CommGroup::world ? world_ : split_[static_cast<std::size_t>(g)].get();
}

}  // namespace dmuon::comm
