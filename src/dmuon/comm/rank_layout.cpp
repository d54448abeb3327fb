#include "dmuon/comm/rank_layout.hpp"

#include <fmt/format.h>

#include "dmuon/base/check.hpp"

namespace dmuon::comm {

RankLayout::RankLayout(MPI_Comm world, int replicate) {
  DMUON_CHECK_MPI(MPI_Comm_rank(world, &world_rank_));
  DMUON_CHECK_MPI(MPI_Comm_size(world, &world_size_));
  DMUON_REQUIRE(replicate >= 1,
                fmt::format("replicate group size R={} must be >= 1 (world of {} ranks = R x G)",
                            replicate, world_size_));
  DMUON_REQUIRE(world_size_ % replicate == 0,
                fmt::format("replicate group size R={} must divide the world size {} (ranks = "
                            "R x G)",
                            replicate, world_size_));
  replicate_ = replicate;
  shard_ = world_size_ / replicate;
  MPI_Comm row = MPI_COMM_NULL;
  DMUON_CHECK_MPI(MPI_Comm_split(world, this->row(), column(), &row));
  shard_comm_ = UniqueComm(row);
  MPI_Comm col = MPI_COMM_NULL;
  DMUON_CHECK_MPI(MPI_Comm_split(world, column(), this->row(), &col));
  replicate_comm_ = UniqueComm(col);
}

}  // namespace dmuon::comm
