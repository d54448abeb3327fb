#include "dmuon/engine/exec/optimizer_step.hpp"

#include "kernels/newton_schulz.hpp"

namespace dmuon::engine {

HostOptimizer::HostOptimizer(const kernels::MuonConfig& muon) : muon_(muon) {}

std::size_t HostOptimizer::prepare(const float* grad, float* momentum, float* input, std::size_t n,
                                   long step) const {
  return kernels::host::muon_momentum(grad, momentum, input, n, step, muon_.momentum,
                                      muon_.nesterov);
}

void HostOptimizer::newton_schulz(float* x, std::int64_t rows, std::int64_t cols,
                                  std::string_view name) {
  auto& ws = workspaces_[{rows, cols}];
  if (!ws)
    ws = std::make_unique<kernels::host::NsWorkspace>(static_cast<std::size_t>(rows),
                                                      static_cast<std::size_t>(cols));
  kernels::host::newton_schulz(x, x, static_cast<std::size_t>(rows), static_cast<std::size_t>(cols),
                               muon_.ns, *ws, name);
}

std::size_t HostOptimizer::apply(float* weight, const float* update, std::size_t n,
                                 std::int64_t rows, std::int64_t cols) const {
  const float scale =
      kernels::muon_scale(static_cast<std::size_t>(rows), static_cast<std::size_t>(cols));
  return kernels::host::muon_apply(weight, update, n, muon_.lr, muon_.weight_decay, scale);
}

std::size_t HostOptimizer::adamw(float* weight, const float* grad, float* exp_avg,
                                 float* exp_avg_sq, std::size_t n, long step) const {
  return kernels::host::adamw_update(weight, grad, exp_avg, exp_avg_sq, n, step, adamw_config());
}

std::int64_t HostOptimizer::workspace_bytes() const {
  std::int64_t b = 0;
  for (const auto& w : workspaces_) b += static_cast<std::int64_t>(w.second->bytes());
  return b;
}

std::int64_t HostOptimizer::workspace_bytes(std::int64_t rows, std::int64_t cols) const {
  const auto it = workspaces_.find({rows, cols});
  return it == workspaces_.end() ? 0 : static_cast<std::int64_t>(it->second->bytes());
}

}  // namespace dmuon::engine
