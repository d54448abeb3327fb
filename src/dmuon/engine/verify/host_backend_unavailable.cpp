// Linked instead of host_backend.cpp and reference.cpp by builds without Kokkos and BLAS (the
// GPU check build, tests/device): the host path is refused in one line, never faked.
#include "dmuon/base/error.hpp"
#include "dmuon/engine/exec/host_backend.hpp"
#include "dmuon/engine/verify/reference.hpp"

namespace dmuon::engine {

std::unique_ptr<StepBackend> make_host_backend(const model::ModuleTree&, const StepLayout&,
                                               const EngineOptions&, const comm::RankGroups&) {
  throw InputError(
      "--device host: this build has no host backend (no Kokkos/BLAS); use "
      "--device cuda or a full build");
}

std::vector<std::vector<float>> reference_weights(const model::ModuleTree&, const plan::Plan&,
                                                  const EngineOptions&, int, AdamwEpsRegime*, int,
                                                  int) {
  throw InputError(
      "--check: this build cannot compute the one-process reference (no Kokkos/"
      "BLAS); check against a reference file written by a full build "
      "(reference_file.hpp)");
}

}  // namespace dmuon::engine
