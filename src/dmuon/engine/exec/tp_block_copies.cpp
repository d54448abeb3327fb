#include "dmuon/engine/exec/tp_block_copies.hpp"

#include <stdexcept>
#include <string>

namespace dmuon::engine {

std::vector<BlockCopy2D> tp_block_copies(std::int64_t rows, std::int64_t cols, int dim, int tp,
                                         std::size_t elem_bytes, bool assemble) {
  const std::int64_t split = dim == 0 ? rows : cols;
  if ((dim != 0 && dim != 1) || tp < 1 || rows < 0 || cols < 0 || split % tp != 0)
    throw std::logic_error("tp_block_copies: a " + std::to_string(rows) + "x" +
                           std::to_string(cols) + " matrix does not split into " +
                           std::to_string(tp) + " blocks along dimension " + std::to_string(dim));
  const auto r = static_cast<std::size_t>(rows), c = static_cast<std::size_t>(cols);
  if (dim == 0) {  // row blocks: the shards one after the other are the matrix
    const std::size_t bytes = r * c * elem_bytes;
    return {BlockCopy2D{0, bytes, 0, bytes, bytes, 1}};
  }
  const std::size_t block = c / static_cast<std::size_t>(tp) * elem_bytes;  // a shard's row
  const std::size_t row = c * elem_bytes;                                   // a matrix row
  std::vector<BlockCopy2D> copies;
  for (std::size_t t = 0; t < static_cast<std::size_t>(tp); ++t) {
    // Shard t is rows × (cols/tp), at t·rows·block; in the matrix its rows start at t·block.
    const std::size_t shard = t * r * block, in_matrix = t * block;
    if (assemble)
      copies.push_back(BlockCopy2D{shard, block, in_matrix, row, block, r});
    else
      copies.push_back(BlockCopy2D{in_matrix, row, shard, block, block, r});
  }
  return copies;
}

}  // namespace dmuon::engine
