#pragma once
// AdamW for the non-Muon (non-dedicated) parameters (SPEC §7): decoupled weight decay,
// bias-corrected, PyTorch semantics.

#include <cstddef>
#include <string_view>

namespace dmuon::kernels {

struct AdamWConfig {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.01f;
};

}  // namespace dmuon::kernels

namespace dmuon::kernels::host {

/// One AdamW step on n elements, one pass; `step` counts from 1. m, v start at zero.
/// w ← (1 − lr·wd)·w;  m ← β1 m + (1−β1) g;  v ← β2 v + (1−β2) g²;
/// w ← w − (lr / (1 − β1ᵗ)) · m / (sqrt(v) / sqrt(1 − β2ᵗ) + eps).
/// Returns the number of non-finite values in grad, counted in the same pass (final when the
/// call returns). When it is nonzero, weight, exp_avg and exp_avg_sq hold garbage at those
/// positions: the caller aborts. Throws KernelError for step < 1 or a null pointer with n > 0.
std::size_t adamw_update(float* weight, const float* grad, float* exp_avg, float* exp_avg_sq,
                         std::size_t n, long step, const AdamWConfig& config);

/// adamw_update behind a separate finiteness pass over grad: throws KernelError naming `name`
/// before touching any state. For tests and benchmarks; the engine uses adamw_update.
void adamw_step(float* weight, const float* grad, float* exp_avg, float* exp_avg_sq, std::size_t n,
                long step, const AdamWConfig& config, std::string_view name = "");

}  // namespace dmuon::kernels::host
