#pragma once
// Compute under communication: an NCCL collective kernel holds one SM per channel (a CTA that
// stays resident until the collective ends, spinning while its peers arrive), and a cuBLAS or
// FlashAttention CTA cannot share the SM with it (registers and shared memory). While a rank
// runs collectives, its compute kernels get the SMs left:
//
//   held      = Σ over the rank's running collective kernels (one per stream at most) of
//               the machine's `collective_sms` of the kernel's link level (machine_model.hpp)
//   d(held)   = seconds + sm_seconds · (S / (S − held) − 1),   S = compute.sm_count
//
// sm_seconds is the part of a compute op that scales with the SMs it gets: each op is costed
// twice, on the whole GPU and on the same GPU with ref = the largest `collective_sms` held
// (with_sms_held: S − ref SMs, each peak scaled to them; GEMMs re-quantised into waves of
// S − ref), and sm_seconds = (d(ref) − seconds) · (S − ref) / ref. Memory-bound kernels and
// launches keep their time (HBM bandwidth is not divided: see docs/PROJECTION.md).
// The replay (replay.cpp) integrates d(held) over a compute instruction as held changes.

#include "dmuon/project/machine_model.hpp"

namespace dmuon::project {

/// SMs held by the machine's largest collective kernel; 0 when the machine models none (CPU
/// machines, GPU files without `collective_sms`).
int reference_held_sms(const Machine& m);

/// The machine's GPU with `held` of its SMs taken: sm_count − held SMs, every peak scaled by
/// (sm_count − held) / sm_count. Requires 0 < held < sm_count.
Machine with_sms_held(const Machine& m, int held);

/// The part of an op's time that scales with its SMs, from its seconds on the whole GPU
/// (`alone`) and with `ref` SMs held (`held_ref`), on a GPU of `sms` SMs; never negative.
double sm_seconds(double alone, double held_ref, int sms, int ref);

/// Seconds of compute of `seconds`, `sm_part` of it on the SMs, with `held` of `sms` SMs taken.
inline double contended_seconds(double seconds, double sm_part, int sms, int held) {
  if (held <= 0 || sm_part <= 0) return seconds;
  return seconds + sm_part * (static_cast<double>(held) / static_cast<double>(sms - held));
}

}  // namespace dmuon::project
