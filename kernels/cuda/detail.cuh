#pragma once
// Private to kernels/cuda: checked-call macros, storage-type dispatch and the pieces of
// Context / NsWorkspace the .cu files share.

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/kernels.hpp"
#include "kernels/kernel_error.hpp"

namespace dmuon::kernels::cuda::detail {

inline void check_cuda(cudaError_t err, const char* call, const char* file, int line) {
  if (err != cudaSuccess) {
    throw KernelError(std::string("CUDA call ") + call + " failed: " + cudaGetErrorString(err) +
                      " (" + file + ":" + std::to_string(line) + ")");
  }
}
inline void check_cublas(cublasStatus_t st, const char* call, const char* file, int line) {
  if (st != CUBLAS_STATUS_SUCCESS) {
    throw KernelError(std::string("cuBLAS call ") + call + " failed: " + cublasGetStatusString(st) +
                      " (" + file + ":" + std::to_string(line) + ")");
  }
}

#define DMUON_CUDA_CHECK(call) \
  ::dmuon::kernels::cuda::detail::check_cuda((call), #call, __FILE__, __LINE__)
#define DMUON_CUBLAS_CHECK(call) \
  ::dmuon::kernels::cuda::detail::check_cublas((call), #call, __FILE__, __LINE__)
#define DMUON_CUDA_CHECK_LAUNCH() DMUON_CUDA_CHECK(cudaGetLastError())

template <class T>
struct Tag {
  using type = T;
};

/// Calls f(Tag<T>{}) with T the device type of `storage`.
template <class F>
decltype(auto) dispatch(Storage storage, F&& f) {
  switch (storage) {
    case Storage::bf16: return f(Tag<__nv_bfloat16>{});
    case Storage::f16: return f(Tag<__half>{});
    default: return f(Tag<float>{});
  }
}

inline cudaDataType_t data_type(Storage s) {
  return s == Storage::f32 ? CUDA_R_32F : (s == Storage::bf16 ? CUDA_R_16BF : CUDA_R_16F);
}

__device__ __forceinline__ float to_f(float v) {
  return v;
}
__device__ __forceinline__ float to_f(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
__device__ __forceinline__ float to_f(__half v) {
  return __half2float(v);
}
template <class T>
__device__ __forceinline__ T from_f(float v);
template <>
__device__ __forceinline__ float from_f<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) {
  return __float2bfloat16(v);
}
template <>
__device__ __forceinline__ __half from_f<__half>(float v) {
  return __float2half(v);
}

inline unsigned grid_for(std::size_t n, unsigned block = 256) {
  const std::size_t g = (n + block - 1) / block;
  return static_cast<unsigned>(g < 65535 * 8 ? (g == 0 ? 1 : g) : 65535 * 8);
}

/// Row-major C (storage c_type, m×n) = alpha·op(A)·op(B) + beta·C via cublasGemmEx with fp32
/// accumulation: computed as the column-major Cᵀ = op(B)ᵀ·op(A)ᵀ.
void gemm_ex(cublasHandle_t h, cudaDataType_t ab_type, cudaDataType_t c_type, bool ta, bool tb,
             std::size_t m, std::size_t n, std::size_t k, float alpha, const void* a, const void* b,
             float beta, void* c);

/// Row-major fp32 C (n×n, full) = op(A)·op(A)ᵀ with cublasSsyrk + mirroring. trans: A is k×n.
void syrk_full_f32(cublasHandle_t h, cudaStream_t s, bool trans, std::size_t n, std::size_t k,
                   const float* a, float* c);

}  // namespace dmuon::kernels::cuda::detail

namespace dmuon::kernels::cuda {

struct Context::Impl {
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  unsigned long long* bad = nullptr;       // device non-finite counter
  unsigned long long* host_bad = nullptr;  // pinned mirror
};

}  // namespace dmuon::kernels::cuda
