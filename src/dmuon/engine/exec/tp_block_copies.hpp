#pragma once
// The tensor-parallel exchange's block copies (kernels/tp_blocks.hpp) as 2-D memory copies, the
// form a device runs them in (cudaMemcpy2DAsync): row blocks are one contiguous copy, column
// blocks one strided copy per shard. Pure geometry in bytes, so the host tests it against the
// host's tp_assemble / tp_split by running the copies on host memory.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dmuon::engine {

/// Copies `height` rows of `width` bytes from src + src_offset (rows src_pitch apart) to
/// dst + dst_offset (rows dst_pitch apart).
struct BlockCopy2D {
  std::size_t src_offset = 0, src_pitch = 0;
  std::size_t dst_offset = 0, dst_pitch = 0;
  std::size_t width = 0, height = 0;
};

/// The copies that make the rows × cols row-major matrix from its `tp` shards laid out one
/// after the other (assemble: src = shards, dst = matrix), or the shards from the matrix
/// (split: src = matrix, dst = shards), split along `dim` (0: row blocks, 1: column blocks),
/// elements of `elem_bytes`. std::logic_error when the matrix does not split that way.
std::vector<BlockCopy2D> tp_block_copies(std::int64_t rows, std::int64_t cols, int dim, int tp,
                                         std::size_t elem_bytes, bool assemble);

}  // namespace dmuon::engine
