#pragma once
// A parameter's linear layer Y = X·Wᵀ over `tokens` rows, as GEMM ops (every element in the
// compute dtype, e bytes; `batch` > 1: that many experts' GEMMs of `tokens` rows each):
//
//   forward  Y (tokens×out) = X (tokens×in)·Wᵀ     2·tokens·out·in FLOPs; reads X, W; writes Y
//   dgrad    dX (tokens×in) = dY·W                 2·tokens·in·out;       reads dY, W; writes dX
//   wgrad    dW (out×in)    = dYᵀ·X                2·out·in·tokens;       reads dY, X; writes dW
//   bias     (with a bias) db = Σ_tokens dY: a reduction reading tokens·out, writing out
//
// so the forward is 2·m·n·k and the backward 4·m·n·k (docs/STEP-WORK.md §2).

#include <cstdint>

#include "dmuon/work/op.hpp"

namespace dmuon::work {

OpPair linear_ops(double tokens, std::int64_t in, std::int64_t out, std::int64_t batch, bool bias,
                  double e);

}  // namespace dmuon::work
