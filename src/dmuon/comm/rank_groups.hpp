#pragma once
// The MPI communicators of one rank's groups in a rank grid (base/rank_grid.hpp): its row
// (shard group), its column (replicate group) and its TP group are split from `world` by the
// grid's instance and member indices (the expert group only with --ep E < G), so every
// rank's index in each communicator is its grid member index; the world group is `world`
// itself (not owned).

#include <mpi.h>

#include <array>

#include "dmuon/base/rank_grid.hpp"
#include "dmuon/comm/unique_comm.hpp"

namespace dmuon::comm {

class RankGroups {
 public:
  /// Collective over `world`. Throws InputError (on every rank alike) unless `world` holds
  /// exactly grid.world() ranks. `pipeline`: with pipeline stages (engine.hpp), this rank's
  /// pipeline group, split by the caller from the whole world (not owned); else MPI_COMM_NULL.
  RankGroups(MPI_Comm world, const RankGrid& grid, MPI_Comm pipeline = MPI_COMM_NULL);

  const RankGrid& grid() const { return grid_; }
  int world_rank() const { return world_rank_; }
  GridRank place() const { return {grid_, world_rank_}; }
  /// This rank's communicator of group `g`.
  MPI_Comm comm(CommGroup g) const;

 private:
  RankGrid grid_;
  int world_rank_ = 0;
  MPI_Comm world_ = MPI_COMM_NULL;
  MPI_Comm pipeline_ = MPI_COMM_NULL;
  // (world, pipeline unused; expert, ep: with --ep)
  std::array<UniqueComm, kCommGroupCount> split_;
};

}  // namespace dmuon::comm
