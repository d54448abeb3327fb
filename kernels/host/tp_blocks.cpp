#include "kernels/tp_blocks.hpp"

#include <algorithm>
#include <string>

#include "kernels/kernel_error.hpp"

namespace dmuon::kernels::host {

namespace {

void check(std::int64_t rows, std::int64_t cols, int dim, int tp, const char* what) {
  const std::int64_t split = dim == 0 ? rows : cols;
  if ((dim != 0 && dim != 1) || tp < 1 || split % tp != 0)
    throw KernelError(std::string(what) + ": a " + std::to_string(rows) + "x" +
                      std::to_string(cols) + " matrix does not split into " + std::to_string(tp) +
                      " blocks along dimension " + std::to_string(dim));
}

}  // namespace

void tp_assemble(const float* shards, float* full, std::int64_t rows, std::int64_t cols, int dim,
                 int tp) {
  check(rows, cols, dim, tp, "tp_assemble");
  if (dim == 0) {  // row blocks: the shards are the matrix already
    std::copy(shards, shards + rows * cols, full);
    return;
  }
  const std::int64_t lc = cols / tp;
  for (int t = 0; t < tp; ++t)
    for (std::int64_t r = 0; r < rows; ++r)
      std::copy(shards + (t * rows + r) * lc, shards + (t * rows + r + 1) * lc,
                full + r * cols + t * lc);
}

void tp_split(const float* full, float* shards, std::int64_t rows, std::int64_t cols, int dim,
              int tp) {
  check(rows, cols, dim, tp, "tp_split");
  if (dim == 0) {
    std::copy(full, full + rows * cols, shards);
    return;
  }
  const std::int64_t lc = cols / tp;
  for (int t = 0; t < tp; ++t)
    for (std::int64_t r = 0; r < rows; ++r)
      std::copy(full + r * cols + t * lc, full + r * cols + (t + 1) * lc,
                shards + (t * rows + r) * lc);
}

}  // namespace dmuon::kernels::host
