#pragma once
// Synthetic Linear layer compute for the engine: thin GEMM wrappers with the right transposes.
// Row-major: x is batch×in, w is out×in (PyTorch nn.Linear layout), y is batch×out.

#include <cstddef>

namespace dmuon::kernels::host {

/// y = x · wᵀ
void linear_forward(const float* x, const float* w, float* y, std::size_t batch,
                    std::size_t in_features, std::size_t out_features);
/// dx = dy · w
void linear_backward_input(const float* dy, const float* w, float* dx, std::size_t batch,
                           std::size_t in_features, std::size_t out_features);
/// dw = dyᵀ · x  (out×in); with accumulate, dw += dyᵀ · x.
void linear_backward_weight(const float* dy, const float* x, float* dw, std::size_t batch,
                            std::size_t in_features, std::size_t out_features,
                            bool accumulate = false);

/// c = alpha · op(a) · op(b) + beta · c, row-major, op = transpose when the flag is set.
/// The one host GEMM entry point (KokkosBlas::gemm), also used by the benchmarks' BM_Sgemm.
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha,
          const float* a, const float* b, float beta, float* c);

}  // namespace dmuon::kernels::host
