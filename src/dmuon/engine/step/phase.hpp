#pragma once
// The wall-time phases of one step, as every executor (host, CUDA, the projection's replay)
// attributes time to them.

#include <cstddef>

namespace dmuon::engine {

/// Wall-time phases of one step on one rank.
enum class Phase {
  forward_comm,      ///< forward all-gathers / packed broadcasts (issue + wait, incl. packing)
  forward_compute,   ///< Y = X·Wᵀ per parameter
  backward_compute,  ///< dX, dW per parameter (+ finiteness checks)
  backward_comm,     ///< Z3 re-broadcast/re-gather, reduce/reduce-scatter/all-reduce issue + waits
  optimizer_ns,      ///< Newton–Schulz
  optimizer_other,   ///< momentum, update, AdamW, optimizer collectives (fsdp-muon, TP)
  exposed_comm,      ///< time blocked in communication calls (not overlapped with compute)
  step,              ///< whole step
  /// Before the step, not part of it: the wait at the world barrier every step starts from,
  /// for the slowest rank's previous step (load imbalance: Newton–Schulz ownership, jitter).
  step_sync,
};
inline constexpr std::size_t kPhaseCount = 9;
const char* phase_name(Phase p);

}  // namespace dmuon::engine
