#pragma once
// Checked CUDA runtime and NCCL calls (private to the NCCL communicator): on failure, throw
// RuntimeFailure naming the call, the code and the library's own error string.

#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "dmuon/base/check.hpp"

#define DMUON_CHECK_CUDA(call)                                                                \
  do {                                                                                        \
    const cudaError_t dmuon_cuda_rc_ = (call);                                                \
    if (dmuon_cuda_rc_ != cudaSuccess)                                                        \
      ::dmuon::detail::throw_call_failure("CUDA", #call, static_cast<long>(dmuon_cuda_rc_),   \
                                          __FILE__, __LINE__,                                 \
                                          ::std::string(cudaGetErrorString(dmuon_cuda_rc_))); \
  } while (0)

#define DMUON_CHECK_NCCL(call)                                                                \
  do {                                                                                        \
    const ncclResult_t dmuon_nccl_rc_ = (call);                                               \
    if (dmuon_nccl_rc_ != ncclSuccess)                                                        \
      ::dmuon::detail::throw_call_failure("NCCL", #call, static_cast<long>(dmuon_nccl_rc_),   \
                                          __FILE__, __LINE__,                                 \
                                          ::std::string(ncclGetErrorString(dmuon_nccl_rc_))); \
  } while (0)
