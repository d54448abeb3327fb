// Built when the CUDA backend is not (no CUDA toolkit or no NCCL at configure time).
#include "dmuon/base/error.hpp"
#include "dmuon/engine/exec/cuda_backend.hpp"

namespace dmuon::engine {

void require_cuda_backend() {
  throw InputError(
      "--device cuda: this build has no CUDA backend (reconfigure with the CUDA toolkit and "
      "NCCL found, DMUON_ENABLE_CUDA=ON); use --device host");
}

std::unique_ptr<StepBackend> make_cuda_backend(const model::ModuleTree&, const StepLayout&,
                                               const EngineOptions&, const comm::RankGroups&) {
  require_cuda_backend();
  return nullptr;
}

}  // namespace dmuon::engine
