#pragma once
// RAII for the Kokkos runtime the host kernels need (tests, benchmarks and apps share it), and
// the one synchronisation point callers need.

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

/// Waits until every host kernel launched so far has finished writing its output.
///
/// The host kernels do not fence on return. Under Kokkos semantics a kernel that only writes
/// (copy, pack, unpack, average_gradient, convert, newton_schulz's output) may still be
/// running when its call returns; the Serial and OpenMP backends happen to block, others need
/// not. Call fence() before a buffer a kernel produced goes to MPI (or to any code outside the
/// kernels: a plain loop, another library, a device copy). Kernels that return a count
/// (muon_momentum, muon_apply, adamw_update, count_non_finite) reduce into a host scalar and
/// are complete when they return. Kernels fence internally only where their own host code
/// reads what an earlier kernel wrote (before each BLAS call). Cheap: a no-op wait on Serial.
void fence();

}  // namespace dmuon::kernels::host
