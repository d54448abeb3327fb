#pragma once
// The tensor-parallel step of a TP-sharded Muon parameter on its DP owner's TP group
// (docs/METRICS.md "Tensor parallelism"), as the step schedule orders it (Op::tp_gather,
// Op::newton_schulz on the TP owner, Op::tp_scatter): the T local shards of the Newton–Schulz
// input go to the TP owner (a gather in the gradient dtype: fp32, or bf16 with --comm-dtype bf16,
// every shard rounded to nearest even, the owner's own as well),
// Newton–Schulz runs there on the full logical matrix, and the fp32 update goes back to the T
// shard holders (a scatter). Blocking MPI_Gather / MPI_Scatter on the TP communicator, counted
// under the convention of collective_counters.hpp extended by: gather volume = bytes sent (the
// non-owners' |p|/T each), scatter volume = bytes received (likewise).
//
// What travels is each shard's Nesterov input: Muon's momentum is elementwise, so the shard
// holders update it on their shards exactly as the owner would on the whole matrix; the bytes
// are those of the gradient shards in the gradient dtype.

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "dmuon/comm/collective_counters.hpp"
#include "dmuon/comm/dtype.hpp"
#include "dmuon/engine/step_layout.hpp"

namespace dmuon::engine {

/// The synthetic-data key of TP shard `tp_rank` of parameter `pid`: every shard is its own
/// synthetic Linear of the local shape (its own inputs, targets and initial weights).
std::uint64_t tp_shard_key(int pid, int tp_rank);

class TpExchange {
 public:
  /// `tp_comm` holds the T ranks of this rank's TP group, ranked by TP index (not owned);
  /// `layout` is this rank's (its tp and tp_rank must match the communicator); the gather
  /// carries `gather_dtype` (f32 or bf16). Throws InputError when a TP shard exceeds one MPI
  /// message (every rank of the world alike).
  TpExchange(const StepLayout& layout, MPI_Comm tp_comm,
             comm::DType gather_dtype = comm::DType::f32);

  /// Sends this rank's shard `x` (p.numel elements) of TP-sharded parameter p's Newton–Schulz
  /// input to its TP owner, which assembles the logical matrix (gathered()). Collective over
  /// the TP group.
  void gather(const ParamLayout& p, const float* x);
  /// On p's TP owner after gather(p): the logical row-major matrix (p.logical), in place.
  float* gathered(const ParamLayout& p);
  /// x receives this rank's shard of the TP owner's logical matrix. Collective over the TP
  /// group; follows gather(p).
  void scatter(const ParamLayout& p, float* x);

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
  // The parameter whose logical matrix full_ holds (-1: none), so that the ops of one exchange
  // cannot be interleaved with another's.
  void expect_pending(const ParamLayout& p, const char* what) const;

  MPI_Comm comm_;
  comm::DType gather_dtype_ = comm::DType::f32;
  int tp_ = 1, rank_ = 0;
  int pending_ = -1;
  std::vector<float> full_, shards_;
  std::vector<std::uint16_t> send16_, recv16_;  // the bf16 gather's wire buffers
  comm::KindCounters gather_, scatter_;
};

}  // namespace dmuon::engine
