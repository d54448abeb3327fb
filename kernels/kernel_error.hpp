#pragma once
// The one exception type of the kernel layer. Kernels do not depend on src/, so the engine maps
// KernelError onto its own error kinds (bad shape or non-finite data -> check failure).

#include <stdexcept>
#include <string>

namespace dmuon::kernels {

/// Bad shape, non-finite data, missing runtime (Kokkos not initialised, no GPU, CUDA not
/// compiled) or a failed CUDA/cuBLAS call. The message names the parameter or the call.
class KernelError : public std::runtime_error {
 public:
  explicit KernelError(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace dmuon::kernels
