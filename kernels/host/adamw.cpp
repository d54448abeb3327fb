#include "kernels/adamw.hpp"

#include <cmath>
#include <string>

#include "kernels/host/views.hpp"
#include "kernels/kernel_error.hpp"
#include "kernels/scoped_kokkos.hpp"

namespace dmuon::kernels::host {

std::size_t adamw_update(float* weight, const float* grad, float* exp_avg, float* exp_avg_sq,
                         std::size_t n, long step, const AdamWConfig& config) {
  require_kokkos("adamw_update");
  detail::require_data(weight, n, "adamw_update", "weight");
  detail::require_data(grad, n, "adamw_update", "gradient");
  detail::require_data(exp_avg, n, "adamw_update", "exp_avg");
  detail::require_data(exp_avg_sq, n, "adamw_update", "exp_avg_sq");
  if (step < 1) {
    throw KernelError("adamw_update: step must be >= 1, got " + std::to_string(step));
  }
  const detail::Vec w(weight, n), m(exp_avg, n), v(exp_avg_sq, n);
  const detail::ConstVec g(grad, n);
  const float b1 = config.beta1, b2 = config.beta2, eps = config.eps;
  const float decay = 1.0f - config.lr * config.weight_decay;
  // Bias corrections in double (β2ᵗ loses digits in fp32 for large t), applied in fp32.
  const double bc1 = 1.0 - std::pow(static_cast<double>(b1), static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(b2), static_cast<double>(step));
  const float step_size = static_cast<float>(config.lr / bc1);
  const float inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  return detail::counting_reduce(
      "dmuon::adamw", n, KOKKOS_LAMBDA(const std::size_t i, std::uint32_t& bad) {
        const float gi = g(i);
        const float mi = b1 * m(i) + (1.0f - b1) * gi;
        const float vi = b2 * v(i) + (1.0f - b2) * gi * gi;
        m(i) = mi;
        v(i) = vi;
        const float denom = std::sqrt(vi) * inv_sqrt_bc2 + eps;
        w(i) = decay * w(i) - step_size * mi / denom;
        bad += std::isfinite(gi) ? 0 : 1;
      });
}

void adamw_step(float* weight, const float* grad, float* exp_avg, float* exp_avg_sq, std::size_t n,
                long step, const AdamWConfig& config, std::string_view name) {
  require_kokkos("adamw_step");
  if (weight == nullptr || grad == nullptr || exp_avg == nullptr || exp_avg_sq == nullptr) {
    throw KernelError("adamw_step: null pointer for parameter " + detail::quoted(name));
  }
  if (step < 1) {
    throw KernelError("adamw_step: step must be >= 1 for parameter " + detail::quoted(name) +
                      ", got " + std::to_string(step));
  }
  detail::check_finite(grad, n, "adamw_step", "gradient", name);     // before any state changes
  adamw_update(weight, grad, exp_avg, exp_avg_sq, n, step, config);  // counts 0: grad is finite
}

}  // namespace dmuon::kernels::host
