#pragma once
// Private to kernels/cuda: checked-call macros, storage-type dispatch, element conversions,
// grid-stride loops, the fused non-finite count, the synthetic generator and the GEMM
// wrappers the .cu files share.

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/cuda/cublas_library.hpp"
#include "kernels/cuda/kernels.hpp"
#include "kernels/cuda/ns_plan.hpp"
#include "kernels/kernel_error.hpp"

namespace dmuon::kernels::cuda {

struct Context::Impl {
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  void* cublas_workspace = nullptr;
};

}  // namespace dmuon::kernels::cuda

namespace dmuon::kernels::cuda::detail {

inline void check_cuda(cudaError_t err, const char* call, const char* file, int line) {
  if (err != cudaSuccess) {
    throw KernelError(std::string("CUDA call ") + call + " failed: " + cudaGetErrorString(err) +
                      " (" + file + ":" + std::to_string(line) + ")");
  }
}
inline void check_cublas(cublasStatus_t st, const char* call, const char* file, int line) {
  if (st != CUBLAS_STATUS_SUCCESS) {
    throw KernelError(std::string("cuBLAS call ") + call +
                      " failed: " + cublas_library().status_string(st) + " (" + file + ":" +
                      std::to_string(line) + ")");
  }
}

#define DMUON_CUDA_CHECK(call) \
  ::dmuon::kernels::cuda::detail::check_cuda((call), #call, __FILE__, __LINE__)
#define DMUON_CUBLAS_CHECK(call) \
  ::dmuon::kernels::cuda::detail::check_cublas((call), #call, __FILE__, __LINE__)
#define DMUON_CUDA_CHECK_LAUNCH() DMUON_CUDA_CHECK(cudaGetLastError())

/// Throws KernelError("<call>: <what> is null") when ptr is null and n > 0.
inline void require_ptr(const void* ptr, std::size_t n, const char* call, const char* what) {
  if (ptr == nullptr && n > 0) {
    throw KernelError(std::string(call) + ": " + what + " is a null pointer (" + std::to_string(n) +
                      " elements)");
  }
}

inline cudaStream_t stream_of(Context& ctx) {
  return ctx.impl().stream;
}

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

/// The Storage of a device type.
template <class T>
constexpr Storage dtype_of() {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return Storage::bf16;
  } else if constexpr (std::is_same_v<T, __half>) {
    return Storage::f16;
  } else {
    static_assert(std::is_same_v<T, float>, "storage types are float, __nv_bfloat16, __half");
    return Storage::f32;
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
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half from_f<__half>(float v) {
  return __float2half_rn(v);
}

/// Threads per block of every 1-D kernel (a multiple of 32: the warp reductions need full warps).
inline constexpr unsigned kBlock = 256;

/// Blocks for a grid-stride loop over n elements: one element per thread up to 65535·8 blocks.
inline unsigned grid_for(std::size_t n, unsigned block = kBlock) {
  const std::size_t g = (n + block - 1) / block;
  return static_cast<unsigned>(g == 0 ? 1 : (g < 65535u * 8u ? g : 65535u * 8u));
}

#define DMUON_GRID_STRIDE(i, n)                                                     \
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < (n); \
       i += std::size_t(gridDim.x) * blockDim.x)

/// Adds the warp's non-finite count to *bad: one atomic per warp, none when no lane saw one.
/// Every lane of the warp must call it (after the grid-stride loop, blockDim a multiple of 32).
__device__ __forceinline__ void add_warp_count(unsigned long long* bad, unsigned long long local) {
  if (bad == nullptr) return;  // kernel argument: uniform
  if (__ballot_sync(0xffffffffu, local != 0) == 0u) return;
  for (int off = 16; off > 0; off /= 2) local += __shfl_down_sync(0xffffffffu, local, off);
  if ((threadIdx.x & 31u) == 0u) atomicAdd(bad, local);
}

// ---- the synthetic generator (src/dmuon/engine/step/synthetic.cpp), host and device -------------

__host__ __device__ __forceinline__ std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// row_key(seed, step, sample, pid, stream) == splitmix64(row_base(seed, step, pid, stream) ^
/// sample): the sample-independent part, hashed once on the host.
inline std::uint64_t row_base(std::uint64_t seed, std::uint64_t step, std::uint64_t pid,
                              std::uint64_t stream) {
  std::uint64_t h = splitmix64(seed);
  h = splitmix64(h ^ step);
  h = splitmix64(h ^ pid);
  return splitmix64(h ^ stream);
}

/// 24 random bits → k·2^-23 − 1 in [-1, 1): every step exact in fp32 (explicit _rn intrinsics
/// so no contraction can change a bit).
__device__ __forceinline__ float to_uniform(std::uint64_t bits) {
  const float k = __ll2float_rn(static_cast<long long>(bits >> 40));
  return __fadd_rn(__fmul_rn(k, 1.0f / 8388608.0f), -1.0f);
}

// ---- GEMM wrappers -----------------------------------------------------------------------------

/// Throws naming `call` when a dimension does not fit cuBLAS's int.
void check_gemm_dims(const plan::RowMajorGemm& g, const char* call);

/// Row-major C (c_type) = alpha·op(A)·op(B) + beta·C via cublasGemmEx, fp32 accumulation
/// (plan::to_column_major gives the column-major call).
void gemm_rm(cublasHandle_t h, cudaDataType_t ab_type, cudaDataType_t c_type,
             const plan::RowMajorGemm& g, float alpha, const void* a, const void* b, float beta,
             void* c);

/// The same for `batch` products sharing g, with DEVICE arrays of A, B and C pointers
/// (cublasGemmBatchedEx).
void gemm_batched_rm(cublasHandle_t h, cudaDataType_t ab_type, cudaDataType_t c_type,
                     const plan::RowMajorGemm& g, float alpha, const void* const* a,
                     const void* const* b, float beta, void* const* c, int batch);

}  // namespace dmuon::kernels::cuda::detail
