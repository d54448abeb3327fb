#pragma once
// The tensor-parallel exchange's block copies (docs/METRICS.md "Tensor parallelism"): `tp`
// shards of a rows × cols row-major logical matrix, split along `dim` (0: column-parallel, row
// blocks of rows/tp; 1: row-parallel, column blocks of cols/tp), laid out one shard after the
// other as a gather delivers them and a scatter sends them. Bit-exact copies.

#include <cstdint>

namespace dmuon::kernels::host {

/// full (rows × cols) from the tp shards; shards and full must not overlap.
void tp_assemble(const float* shards, float* full, std::int64_t rows, std::int64_t cols, int dim,
                 int tp);
/// The tp shards of full; the inverse of tp_assemble.
void tp_split(const float* full, float* shards, std::int64_t rows, std::int64_t cols, int dim,
              int tp);

}  // namespace dmuon::kernels::host
