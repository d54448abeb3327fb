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

}  // namespace dmuon::kernels::host
