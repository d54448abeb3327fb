#include "kernels/muon.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/host/views.hpp"
#include "kernels/host/workspace.hpp"
#include "kernels/kernel_error.hpp"
#include "kernels/scoped_kokkos.hpp"

namespace dmuon::kernels::host {

std::size_t muon_momentum(const float* grad, float* momentum_buf, float* input, std::size_t n,
                          long step, float momentum, bool nesterov) {
  require_kokkos("muon_momentum");
  detail::require_data(grad, n, "muon_momentum", "gradient");
  detail::require_data(momentum_buf, n, "muon_momentum", "momentum buffer");
  detail::require_data(input, n, "muon_momentum", "input");
  const detail::ConstVec g(grad, n);
  const detail::Vec buf(momentum_buf, n);
  const detail::Vec in(input, n);
  const bool first = step <= 1;
  return detail::counting_reduce(
      "dmuon::muon_momentum", n, KOKKOS_LAMBDA(const std::size_t i, std::uint32_t& bad) {
        const float gi = g(i);
        const float b = first ? gi : momentum * buf(i) + gi;
        buf(i) = b;
        in(i) = nesterov ? gi + momentum * b : b;
        bad += std::isfinite(gi) ? 0 : 1;
      });
}

std::size_t muon_apply(float* weight, const float* update, std::size_t n, float lr,
                       float weight_decay, float scale) {
  require_kokkos("muon_apply");
  detail::require_data(weight, n, "muon_apply", "weight");
  detail::require_data(update, n, "muon_apply", "update");
  const detail::Vec w(weight, n);
  const detail::ConstVec o(update, n);
  const float decay = 1.0f - lr * weight_decay;
  const float step = lr * scale;
  return detail::counting_reduce(
      "dmuon::muon_apply", n, KOKKOS_LAMBDA(const std::size_t i, std::uint32_t& bad) {
        const float wi = decay * w(i) - step * o(i);
        w(i) = wi;
        bad += std::isfinite(wi) ? 0 : 1;
      });
}

void muon_step(float* weight, const float* grad, float* momentum_buf, std::size_t rows,
               std::size_t cols, long step, const MuonConfig& config, NsWorkspace& workspace,
               std::string_view name) {
  require_kokkos("muon_step");
  if (weight == nullptr || grad == nullptr || momentum_buf == nullptr) {
    throw KernelError("muon_step: null pointer for parameter " + detail::quoted(name));
  }
  if (rows == 0 || cols == 0 || rows != workspace.rows() || cols != workspace.cols()) {
    throw KernelError("muon_step: parameter " + detail::quoted(name) + " is " +
                      std::to_string(rows) + "x" + std::to_string(cols) + " but the workspace is " +
                      std::to_string(workspace.rows()) + "x" + std::to_string(workspace.cols()));
  }
  if (step < 1) {
    throw KernelError("muon_step: step must be >= 1 for parameter " + detail::quoted(name) +
                      ", got " + std::to_string(step));
  }
  const std::size_t n = rows * cols;
  detail::check_finite(grad, n, "muon_step", "gradient", name);  // before any state changes
  NsWorkspace::Impl& ws = workspace.impl();
  // The gradient is finite (checked above), so momentum's own count is zero.
  muon_momentum(grad, momentum_buf, ws.muon_in.data(), n, step, config.momentum, config.nesterov);
  newton_schulz(ws.muon_in.data(), ws.muon_out.data(), rows, cols, config.ns, workspace, name);
  const std::size_t bad = muon_apply(weight, ws.muon_out.data(), n, config.lr, config.weight_decay,
                                     muon_scale(rows, cols));
  if (bad != 0) {
    throw KernelError("muon_step: updated weight of parameter " + detail::quoted(name) + " has " +
                      std::to_string(bad) + " non-finite value(s) of " + std::to_string(n));
  }
}

}  // namespace dmuon::kernels::host
