#pragma once
// Muon update on the owner (SPEC §7): momentum, Nesterov input, Newton–Schulz, scaled and
// decoupled-weight-decay update. Host versions here; CUDA versions in kernels/cuda/kernels.hpp.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string_view>

#include "kernels/newton_schulz.hpp"

namespace dmuon::kernels {

struct MuonConfig {
  float lr = 0.02f;
  float momentum = 0.95f;  ///< μ, no dampening
  float weight_decay = 0.0f;
  bool nesterov = true;  ///< NS input G + μ·buf (true) or buf (false)
  NsConfig ns{};
};

/// 0.2·sqrt(max(rows, cols)): matches the update RMS to AdamW's.
inline float muon_scale(std::size_t rows, std::size_t cols) {
  return 0.2f * static_cast<float>(std::sqrt(static_cast<double>(std::max(rows, cols))));
}

}  // namespace dmuon::kernels

namespace dmuon::kernels::host {

/// One Muon step on a rows×cols parameter. `step` counts from 1 (at step 1 buf = grad).
/// Checks grad for NaN/Inf *before* touching any state and throws KernelError naming `name`.
void muon_step(float* weight, const float* grad, float* momentum_buf, std::size_t rows,
               std::size_t cols, long step, const MuonConfig& config, NsWorkspace& workspace,
               std::string_view name = "");

/// Elementwise parts, exposed for benchmarks and the engine:
/// buf = (step == 1) ? g : μ·buf + g;  input = nesterov ? g + μ·buf : buf.
void muon_momentum(const float* grad, float* momentum_buf, float* input, std::size_t n, long step,
                   float momentum, bool nesterov);
/// weight = (1 − lr·wd)·weight − lr·scale·update.
void muon_apply(float* weight, const float* update, std::size_t n, float lr, float weight_decay,
                float scale);

}  // namespace dmuon::kernels::host
