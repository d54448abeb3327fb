#pragma once
// cuBLAS, opened on first use instead of at program start. Linking libcublas makes the dynamic
// loader map and relocate it (and its 540 MB libcublasLt) in every process: 0.37 s before main
// on the 2-core CI machine, paid by each tool run and each MPI rank although only --device cuda
// ever calls cuBLAS. The handful of entry points the CUDA kernels use are resolved here once.

#include <cublas_v2.h>

#include <string>
#include <vector>

namespace dmuon::kernels::cuda {

/// The cuBLAS entry points the CUDA kernels call (names as in cublas_api.h, _v2 where the
/// header maps them).
struct CublasLibrary {
  cublasStatus_t (*create)(cublasHandle_t*) = nullptr;
  cublasStatus_t (*destroy)(cublasHandle_t) = nullptr;
  cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t) = nullptr;
  cublasStatus_t (*set_workspace)(cublasHandle_t, void*, size_t) = nullptr;
  cublasStatus_t (*set_math_mode)(cublasHandle_t, cublasMath_t) = nullptr;
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                            const void*, const void*, cudaDataType, int, const void*, cudaDataType,
                            int, const void*, void*, cudaDataType, int, cublasComputeType_t,
                            cublasGemmAlgo_t) = nullptr;
  cublasStatus_t (*gemm_batched_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                    int, const void*, const void* const[], cudaDataType, int,
                                    const void* const[], cudaDataType, int, const void*,
                                    void* const[], cudaDataType, int, int, cublasComputeType_t,
                                    cublasGemmAlgo_t) = nullptr;
  const char* (*status_string)(cublasStatus_t) = nullptr;
};

/// The first of `candidates` (file names or paths, as dlopen takes them) that opens and has
/// every entry point. Throws KernelError naming each candidate and why it failed.
CublasLibrary open_cublas(const std::vector<std::string>& candidates);

/// This build's cuBLAS (its soname, then the toolkit's copy it was built against), opened once
/// per process on first call; later calls after a failure throw the same error.
const CublasLibrary& cublas_library();

}  // namespace dmuon::kernels::cuda
