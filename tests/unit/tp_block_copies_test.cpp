// The device's TP block copies, run as plain 2-D copies on host memory, against the host's
// tp_assemble / tp_split (kernels/tp_blocks.hpp, itself tested against hand-laid blocks), and
// one hand-checked layout.
#include "dmuon/engine/exec/tp_block_copies.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>
#include <vector>

#include "kernels/tp_blocks.hpp"

namespace dmuon::engine {
namespace {

// What cudaMemcpy2D does, on the host.
void run(const std::vector<BlockCopy2D>& copies, const void* src, void* dst) {
  for (const auto& c : copies)
    for (std::size_t h = 0; h < c.height; ++h)
      std::memcpy(static_cast<unsigned char*>(dst) + c.dst_offset + h * c.dst_pitch,
                  static_cast<const unsigned char*>(src) + c.src_offset + h * c.src_pitch, c.width);
}

std::vector<float> counting(std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i);
  return v;
}

TEST(TpBlockCopies, ColumnBlocksByHand) {
  // 2 × 4 matrix, 2 column blocks: shard 0 = columns 0-1, shard 1 = columns 2-3.
  const std::vector<float> shards = {0, 1, 4, 5, 2, 3, 6, 7};
  std::vector<float> full(8, -1);
  run(tp_block_copies(2, 4, 1, 2, sizeof(float), true), shards.data(), full.data());
  EXPECT_EQ(full, (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7}));
  std::vector<float> back(8, -1);
  run(tp_block_copies(2, 4, 1, 2, sizeof(float), false), full.data(), back.data());
  EXPECT_EQ(back, shards);
}

TEST(TpBlockCopies, MatchTheHostBlocksForBothSplitsAndElementSizes) {
  for (int dim : {0, 1})
    for (int tp : {1, 2, 4}) {
      const std::int64_t rows = 8, cols = 12;
      const auto n = static_cast<std::size_t>(rows * cols);
      const std::vector<float> shards = counting(n);
      std::vector<float> want(n), got(n, -1);
      kernels::host::tp_assemble(shards.data(), want.data(), rows, cols, dim, tp);
      run(tp_block_copies(rows, cols, dim, tp, sizeof(float), true), shards.data(), got.data());
      EXPECT_EQ(got, want) << "assemble dim " << dim << " tp " << tp;
      std::vector<float> split_want(n), split_got(n, -1);
      kernels::host::tp_split(want.data(), split_want.data(), rows, cols, dim, tp);
      run(tp_block_copies(rows, cols, dim, tp, sizeof(float), false), want.data(),
          split_got.data());
      EXPECT_EQ(split_got, split_want) << "split dim " << dim << " tp " << tp;
      // 2-byte elements (bf16 on the device): the same permutation of 16-bit words.
      std::vector<std::uint16_t> s16(n), f16(n, 0xffff);
      for (std::size_t i = 0; i < n; ++i) s16[i] = static_cast<std::uint16_t>(i);
      run(tp_block_copies(rows, cols, dim, tp, 2, true), s16.data(), f16.data());
      for (std::size_t i = 0; i < n; ++i)
        EXPECT_EQ(static_cast<float>(f16[i]), want[i]) << "bf16-sized element " << i;
    }
}

TEST(TpBlockCopies, RefusesAMatrixThatDoesNotSplit) {
  EXPECT_THROW(tp_block_copies(6, 4, 1, 3, 4, true), std::logic_error);
  EXPECT_THROW(tp_block_copies(6, 4, 2, 2, 4, true), std::logic_error);
}

}  // namespace
}  // namespace dmuon::engine
