#include "kernels/linear.hpp"

#include "kernels/host/views.hpp"
#include "kernels/scoped_kokkos.hpp"

namespace dmuon::kernels::host {

void linear_forward(const float* x, const float* w, float* y, std::size_t batch,
                    std::size_t in_features, std::size_t out_features) {
  require_kokkos("linear_forward");
  detail::gemm(false, true, batch, out_features, in_features, 1.0f, x, w, 0.0f, y);
}

void linear_backward_input(const float* dy, const float* w, float* dx, std::size_t batch,
                           std::size_t in_features, std::size_t out_features) {
  require_kokkos("linear_backward_input");
  detail::gemm(false, false, batch, in_features, out_features, 1.0f, dy, w, 0.0f, dx);
}

void linear_backward_weight(const float* dy, const float* x, float* dw, std::size_t batch,
                            std::size_t in_features, std::size_t out_features, bool accumulate) {
  require_kokkos("linear_backward_weight");
  detail::gemm(true, false, out_features, in_features, batch, 1.0f, dy, x, accumulate ? 1.0f : 0.0f,
               dw);
}

}  // namespace dmuon::kernels::host
