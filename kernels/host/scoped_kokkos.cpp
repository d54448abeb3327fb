#include "kernels/scoped_kokkos.hpp"

#include <Kokkos_Core.hpp>

#include <string>

#include "kernels/kernel_error.hpp"

namespace dmuon::kernels::host {

ScopedKokkos::ScopedKokkos() {
  if (!Kokkos::is_initialized()) {
    Kokkos::initialize();
    owns_ = true;
  }
}

ScopedKokkos::~ScopedKokkos() {
  if (owns_ && Kokkos::is_initialized()) Kokkos::finalize();
}

void require_kokkos(const char* kernel) {
  if (!Kokkos::is_initialized()) {
    throw KernelError(std::string(kernel) +
                      ": Kokkos is not initialised (hold a dmuon::kernels::host::ScopedKokkos)");
  }
}

void fence() {
  require_kokkos("fence");
  // The host execution space only: the kernels never launch elsewhere, and a global
  // Kokkos::fence() would also wait for device work of a CUDA-enabled Kokkos.
#if KOKKOS_VERSION >= 40000
  Kokkos::DefaultHostExecutionSpace().fence("dmuon::kernels::host::fence");
#else
  Kokkos::DefaultHostExecutionSpace().fence();  // Kokkos 3.4 fences take no label
#endif
}

}  // namespace dmuon::kernels::host
