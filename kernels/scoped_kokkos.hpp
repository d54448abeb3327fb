#pragma once
// RAII for the Kokkos runtime the host kernels need; tests, benchmarks and apps share it.

namespace dmuon::kernels::host {

/// Initialises Kokkos if nobody has yet and finalises it on destruction only if it did.
/// Kokkos 4 cannot be re-initialised after finalize: hold one ScopedKokkos for the whole
/// process (e.g. in main or a GoogleTest global environment), not one per test.
class ScopedKokkos {
 public:
  ScopedKokkos();
  ~ScopedKokkos();
  ScopedKokkos(const ScopedKokkos&) = delete;
  ScopedKokkos& operator=(const ScopedKokkos&) = delete;
  /// True when this object initialised Kokkos (and will finalise it).
  bool owns() const { return owns_; }

 private:
  bool owns_ = false;
};

/// Throws KernelError when Kokkos is not initialised (every host kernel calls it first).
void require_kokkos(const char* kernel);

}  // namespace dmuon::kernels::host
