#pragma once
// How long one kernel takes on a modelled device (one rank), from the machine file:
//
//   GEMM (m×n output, inner dimension k, in dtype t)
//     flops  = 2·m·n·k
//     waves  = ceil(tiles / SMs), tiles = ceil(m / tile_m)·ceil(n / tile_n)   (GPU only)
//     util   = tiles / (waves · SMs)                    wave quantization (NVIDIA's "Matrix
//                                                       Multiplication Background" guide)
//              · d / (d + half_dim), d = min(m, n, k)   thin GEMMs (machine's gemm_half_dim;
//                                                       0 = off: calibrated CPUs set it)
//     time   = overhead + max(flops / (peak_t · gemm_efficiency · util),
//                             bytes_moved / (memory_bandwidth · memory_efficiency))
//     bytes_moved = (m·k + k·n + m·n) · element size    (each operand once: the roofline's
//                                                       memory side, which bounds thin GEMMs)
//   fp8 GEMM (--compute-dtype fp8)  the same with peak_fp8 · fp8_gemm_efficiency and
//     bytes_moved = m·k + k·n + 2·m·n (fp8 operands, bf16 output)
//   symmetric product (X·Xᵀ, R², …) by tiles of the upper block triangle: the same with
//     (b+1)/(2b) of the work (GPU: ns_plan's b; CPU: BLAS SYRK, half the work)
//   elementwise kernel  time = overhead + bytes / (memory_bandwidth · memory_efficiency)
//   every kernel above × share: share = compute_share(machine, world) (machine_model.hpp),
//     the ranks of a node computing at once on fewer cores (calibrated CPUs; 1 elsewhere)
//
// Newton–Schulz is costed as the exact sequence of kernels the engine runs: on a GPU the
// CUDA plan (kernels/cuda/ns_plan.hpp: run_gram / run_direct, replayed through a costing
// executor); on a CPU the host kernel's sequence (kernels/host/newton_schulz.cpp).

#include <cstddef>
#include <cstdint>

#include "dmuon/project/machine_model.hpp"
#include "kernels/dtype.hpp"
#include "kernels/ns_coefficients.hpp"

namespace dmuon::project {

class ComputeCost {
 public:
  /// `share`: every kernel takes that many times its time alone on a core (>= 1;
  /// compute_share(machine, world)).
  explicit ComputeCost(const Machine& machine, double share = 1.0)
      : m_(machine), share_(share < 1.0 ? 1.0 : share) {}

  /// One GEMM with an m×n output and inner dimension k (0 when any dimension is 0).
  double gemm(std::int64_t m, std::int64_t n, std::int64_t k, kernels::Dtype t) const;
  /// One fp8 GEMM (torch._scaled_mm: e4m3/e5m2 operands, 1 byte each, bf16 output) at the
  /// machine's fp8 peak · fp8_gemm_efficiency, with the same wave and thin-GEMM terms;
  /// InputError when the machine has no fp8 peak.
  double gemm_fp8(std::int64_t m, std::int64_t n, std::int64_t k) const;
  /// The upper block triangle of an m×m symmetric product with inner dimension k, done as
  /// `fraction` of the full GEMM's work (one kernel).
  double symmetric(std::int64_t m, std::int64_t k, kernels::Dtype t, double fraction) const;
  /// One streaming kernel over `bytes` of reads plus writes (0 bytes: the overhead only).
  double elementwise(double bytes) const;
  /// The synthetic draw of `elements` values written in `t` (one kernel).
  double synthetic(std::int64_t elements, kernels::Dtype t) const;
  /// One Newton–Schulz of a rows×cols matrix iterated in `t` (GPU: the --ns-dtype; CPU: fp32),
  /// input in `input` (the momentum's Nesterov output type), written back in place.
  double newton_schulz(std::int64_t rows, std::int64_t cols, const kernels::NsConfig& cfg,
                       kernels::Dtype t, kernels::Dtype input) const;

  const Machine& machine() const { return m_; }

 private:
  double memory_time(double bytes) const;
  double overhead() const { return m_.compute.kernel_overhead_us * 1e-6; }
  double gemm_work(double m, double n, double k, kernels::Dtype t, double fraction) const;
  double utilization(double m, double n, double k, double fraction) const;

  const Machine& m_;
  double share_ = 1.0;
};

}  // namespace dmuon::project
