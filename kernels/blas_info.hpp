#pragma once
// What the host BLAS really runs, for provenance and for the one warning a user needs: Debian's
// OpenBLAS falls back to its generic (Prescott) kernels on CPUs it does not recognise, which
// makes every host GEMM ~4x slower on an AVX-512 machine (docs/KERNELS.md).

#include <cstddef>
#include <string>

namespace dmuon::kernels::host {

struct BlasInfo {
  std::string library;    ///< openblas_get_config(), e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH ...", or
                          ///< "unknown (not OpenBLAS)"
  std::string core;       ///< openblas_get_corename(), e.g. "Haswell", "SkylakeX", "Prescott"; ""
                          ///< when the BLAS is not OpenBLAS
  std::string cpu_model;  ///< /proc/cpuinfo "model name" (or "unknown")
  std::string cpu_features;  ///< the vector extensions this CPU has: "avx2,avx512f" (x86 only)
};

/// Queried once per call (cheap).
BlasInfo blas_info();

/// When OpenBLAS runs generic kernels on a CPU with AVX2 or AVX-512, one line saying so with
/// the remedy (OPENBLAS_CORETYPE=Haswell / SkylakeX); "" otherwise.
std::string generic_kernel_warning(const BlasInfo& info);

/// True for OpenBLAS core names of its pre-AVX2 generic x86 kernels (Prescott, Core2, Nehalem,
/// Atom, ..., and "generic").
bool is_generic_core(const std::string& core);

/// Measures single-precision GEMM on n x n x n through the host GEMM entry point (needs
/// Kokkos): the median of `reps` timed calls after one warm-up call, in GFLOP/s (2·n³ per
/// call) — under contention, what this process actually gets from its cores.
double measure_sgemm_gflops(std::size_t n = 512, int reps = 5);

}  // namespace dmuon::kernels::host
