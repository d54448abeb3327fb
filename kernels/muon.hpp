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
/// Checks grad for NaN/Inf *before* touching any state and throws KernelError naming `name`
/// (a separate pass: the engine uses the fused parts below instead); also throws, naming
/// `name`, when the updated weight holds NaN/Inf (counted in the update's own pass).
void muon_step(float* weight, const float* grad, float* momentum_buf, std::size_t rows,
               std::size_t cols, long step, const MuonConfig& config, NsWorkspace& workspace,
               std::string_view name = "");

/// Elementwise parts, exposed for benchmarks and the engine. Each is one pass over the data
/// that also counts non-finite values (a reduction in the same loop, so the engine's NaN/Inf
/// detection costs no extra pass); the count is final when the call returns. Null pointers
/// are allowed only with n == 0 (else KernelError).
///
/// buf = (step <= 1) ? g : μ·buf + g;  input = nesterov ? g + μ·buf : buf.
/// Returns the number of non-finite values in grad. When it is nonzero, buf and input hold
/// garbage at those positions: the caller aborts the step.
std::size_t muon_momentum(const float* grad, float* momentum_buf, float* input, std::size_t n,
                          long step, float momentum, bool nesterov);
/// weight = (1 − lr·wd)·weight − lr·scale·update.
/// Returns the number of non-finite values in the updated weight.
std::size_t muon_apply(float* weight, const float* update, std::size_t n, float lr,
                       float weight_decay, float scale);

}  // namespace dmuon::kernels::host
