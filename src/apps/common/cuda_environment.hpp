#pragma once
// The CUDA runtime's settings a tool fixes before its first CUDA call.

namespace dmuon::apps {

/// CUDA_MODULE_LOADING=EAGER unless the user set the variable (then theirs stays): with lazy
/// loading a kernel's first launch loads its module, which can stall or deadlock behind NCCL
/// kernels already spinning on the device in step 1. Call first in main, before MPI or CUDA.
void prefer_eager_cuda_module_loading();

}  // namespace dmuon::apps
