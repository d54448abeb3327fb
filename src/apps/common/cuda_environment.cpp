#include "common/cuda_environment.hpp"

#include <cstdlib>

namespace dmuon::apps {

void prefer_eager_cuda_module_loading() {
  ::setenv("CUDA_MODULE_LOADING", "EAGER", /*overwrite=*/0);
}

}  // namespace dmuon::apps
