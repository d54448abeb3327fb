#pragma once
// HSDP rank layout (SPEC §6): world = R replicate rows × G shard columns, rank = r·G + s.
// Owns the two split communicators:
//   shard group     = row r    (the G ranks sharing r; rank within it = s)
//   replicate group = column s (the R ranks sharing s; rank within it = r)
// R = 1 is plain 1-D DMuon: one row holding every rank, columns of one rank each.

#include <mpi.h>

#include "dmuon/comm/unique_comm.hpp"

namespace dmuon::comm {

class RankLayout {
 public:
  /// Collective over `world`. Throws InputError unless replicate >= 1 and replicate divides
  /// the size of `world` (all ranks throw alike).
  RankLayout(MPI_Comm world, int replicate);

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  /// R and G.
  int replicate_size() const { return replicate_; }
  int shard_size() const { return shard_; }
  /// r (this rank's row) and s (its column).
  int row() const { return world_rank_ / shard_; }
  int column() const { return world_rank_ % shard_; }
  /// World rank at (row, column): row·G + column.
  int world_rank_of(int row, int column) const { return row * shard_ + column; }

  /// This rank's row (size G) and column (size R) communicators.
  MPI_Comm shard_comm() const { return shard_comm_.get(); }
  MPI_Comm replicate_comm() const { return replicate_comm_.get(); }

 private:
  int world_rank_ = 0;
  int world_size_ = 1;
  int replicate_ = 1;
  int shard_ = 1;
  UniqueComm shard_comm_;
  UniqueComm replicate_comm_;
};

}  // namespace dmuon::comm
