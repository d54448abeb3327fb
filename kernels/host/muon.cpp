#include "kernels/muon.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/host/views.hpp"
#include "kernels/host/workspace.hpp"
#include "kernels/kernel_error.hpp"
#include "kernels/scoped_kokkos.hpp"

namespace dmuon::kernels::host {

void muon_momentum(const float* grad, float* momentum_buf, float* input, std::size_t n, long step,
                   float momentum, bool nesterov) {
  require_kokkos("muon_momentum");
  const detail::ConstVec g(grad, n);
  const detail::Vec buf(momentum_buf, n);
  const detail::Vec in(input, n);
  const bool first = step <= 1;
  Kokkos::parallel_for(
      "dmuon::muon_momentum", detail::range(n), KOKKOS_LAMBDA(const std::size_t i) {
        const float gi = g(i);
        const float b = first ? gi : momentum * buf(i) + gi;
        buf(i) = b;
        in(i) = nesterov ? gi + momentum * b : b;
      });
}

void muon_apply(float* weight, const float* update, std::size_t n, float lr, float weight_decay,
                float scale) {
  require_kokkos("muon_apply");
  const detail::Vec w(weight, n);
  const detail::ConstVec o(update, n);
  const float decay = 1.0f - lr * weight_decay;
  const float step = lr * scale;
  Kokkos::parallel_for(
      "dmuon::muon_apply", detail::range(n),
      KOKKOS_LAMBDA(const std::size_t i) { w(i) = decay * w(i) - step * o(i); });
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
  muon_momentum(grad, momentum_buf, ws.muon_in.data(), n, step, config.momentum, config.nesterov);
  newton_schulz(ws.muon_in.data(), ws.muon_out.data(), rows, cols, config.ns, workspace, name);
  muon_apply(weight, ws.muon_out.data(), n, config.lr, config.weight_decay, muon_scale(rows, cols));
}

}  // namespace dmuon::kernels::host
