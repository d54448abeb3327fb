#pragma once
// The tensor-parallel step of a TP-sharded Muon parameter on its DP owner's TP group
// (docs/METRICS.md "Tensor parallelism"): the T local shards of the Newton–Schulz input go to
// the TP owner (a gather, fp32 = the grad dtype the engine supports with --tp), Newton–Schulz
// runs there on the full logical matrix, and the fp32 update goes back to the T shard holders
// (a scatter). Blocking MPI_Gather / MPI_Scatter on the TP communicator, counted under the
// convention of collective_counters.hpp extended by: gather volume = bytes sent (the
// non-owners' |p|/T each), scatter volume = bytes received (likewise).
//
// What travels is each shard's Nesterov input: Muon's momentum is elementwise, so the shard
// holders update it on their shards exactly as the owner would on the whole matrix; the bytes
// are those of the gradient shards in fp32.

#include <mpi.h>

#include <cstdint>
#include <string_view>
#include <vector>

#include "dmuon/comm/collective_counters.hpp"
#include "dmuon/engine/optimizer_step.hpp"
#include "dmuon/model/module_tree.hpp"
#include "dmuon/plan/plan.hpp"

namespace dmuon::engine {

/// The synthetic-data key of TP shard `tp_rank` of parameter `pid`: every shard is its own
/// synthetic Linear of the local shape (its own inputs, targets and initial weights).
std::uint64_t tp_shard_key(int pid, int tp_rank);

class TpExchange {
 public:
  /// `logical` is the model with the logical shapes; `tp_comm` holds the T ranks of this
  /// rank's TP group, ranked by TP index (not owned).
  TpExchange(const model::ModuleTree& logical, const plan::Plan& plan, MPI_Comm tp_comm);

  int tp() const { return tp_; }
  int tp_rank() const { return rank_; }
  bool sharded(int pid) const { return param(pid).dim >= 0; }
  std::int64_t logical_rows(int pid) const { return param(pid).rows; }
  std::int64_t logical_cols(int pid) const { return param(pid).cols; }
  /// tp_shard_key for a TP-sharded parameter, else the parameter id.
  std::uint64_t data_key(int pid) const;

  /// x holds this rank's local shard (numel/T elements) of parameter `pid`'s Newton–Schulz
  /// input; afterwards it holds its shard of NS(full matrix), computed on the TP owner.
  /// Collective over the TP group.
  void orthogonalize(int pid, float* x, HostOptimizer& opt, std::string_view name);

  const comm::KindCounters& gather_counters() const { return gather_; }
  const comm::KindCounters& scatter_counters() const { return scatter_; }

  /// The full logical row-major matrix from the T shards laid out one after the other (as a
  /// gather delivers them), and back. Column-parallel (dim 0) shards are row blocks: both
  /// are copies; row-parallel (dim 1) shards are column blocks.
  static void assemble(const float* shards, float* full, std::int64_t rows, std::int64_t cols,
                       int dim, int tp);
  static void split(const float* full, float* shards, std::int64_t rows, std::int64_t cols, int dim,
                    int tp);

 private:
  struct Param {
    int dim = -1;
    int owner = -1;
    std::int64_t rows = 0, cols = 0;
  };
  const Param& param(int pid) const { return params_.at(static_cast<std::size_t>(pid)); }

  MPI_Comm comm_;
  int tp_ = 1, rank_ = 0;
  std::vector<Param> params_;
  std::vector<float> full_, shards_;
  comm::KindCounters gather_, scatter_;
};

}  // namespace dmuon::engine
