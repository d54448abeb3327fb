// CUDA runtime pieces: context, memory, events, GEMM/SYRK wrappers, conversions, pack/unpack.
#include <string>

#include "kernels/cuda/detail.cuh"

namespace dmuon::kernels::cuda {

namespace {

template <class Tin, class Tout>
__global__ void convert_kernel(const Tin* in, Tout* out, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    out[i] = detail::from_f<Tout>(detail::to_f(in[i]));
  }
}

// Column-major upper triangle -> lower triangle.
__global__ void mirror_upper_kernel(float* c, std::size_t n) {
  for (std::size_t idx = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; idx < n * n;
       idx += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t i = idx % n, j = idx / n;
    if (i > j) c[idx] = c[j + i * n];
  }
}

__global__ void scale_kernel(float* x, std::size_t n, float s) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    x[i] *= s;
  }
}

cudaStream_t stream_of(Context& ctx) {
  return ctx.impl().stream;
}

}  // namespace

std::size_t storage_bytes(Storage storage) {
  return storage == Storage::f32 ? 4 : 2;
}
std::string_view to_string(Storage storage) {
  return storage == Storage::f32 ? "f32" : (storage == Storage::bf16 ? "bf16" : "f16");
}
bool compiled() {
  return true;
}

int device_count() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    throw KernelError(std::string("cudaGetDeviceCount failed: ") + cudaGetErrorString(err) +
                      " (no GPU or no driver on this machine?)");
  }
  return n;
}

Context::Context(void* stream) : impl_(std::make_unique<Impl>()) {
  impl_->stream = static_cast<cudaStream_t>(stream);
  DMUON_CUBLAS_CHECK(cublasCreate(&impl_->cublas));
  DMUON_CUBLAS_CHECK(cublasSetStream(impl_->cublas, impl_->stream));
  // Plain fp32 math for fp32 storage (no TF32): the host path is the oracle.
  DMUON_CUBLAS_CHECK(cublasSetMathMode(impl_->cublas, CUBLAS_DEFAULT_MATH));
  impl_->bad = static_cast<unsigned long long*>(device_alloc(sizeof(unsigned long long)));
  DMUON_CUDA_CHECK(cudaMallocHost(&impl_->host_bad, sizeof(unsigned long long)));
}

Context::~Context() {
  if (!impl_) return;
  if (impl_->cublas) cublasDestroy(impl_->cublas);
  device_free(impl_->bad);
  if (impl_->host_bad) cudaFreeHost(impl_->host_bad);
}

void* Context::stream() const {
  return impl_->stream;
}
void Context::synchronize() const {
  DMUON_CUDA_CHECK(cudaStreamSynchronize(impl_->stream));
}

void* device_alloc(std::size_t bytes) {
  void* p = nullptr;
  DMUON_CUDA_CHECK(cudaMalloc(&p, bytes == 0 ? 1 : bytes));
  return p;
}
void device_free(void* ptr) noexcept {
  if (ptr) cudaFree(ptr);
}
void copy_to_device(void* dst, const void* src, std::size_t bytes) {
  DMUON_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
void copy_to_host(void* dst, const void* src, std::size_t bytes) {
  DMUON_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

EventTimer::EventTimer(Context& ctx) : stream_(ctx.stream()) {
  cudaEvent_t a, b;
  DMUON_CUDA_CHECK(cudaEventCreate(&a));
  DMUON_CUDA_CHECK(cudaEventCreate(&b));
  start_ = a;
  stop_ = b;
}
EventTimer::~EventTimer() {
  if (start_) cudaEventDestroy(static_cast<cudaEvent_t>(start_));
  if (stop_) cudaEventDestroy(static_cast<cudaEvent_t>(stop_));
}
void EventTimer::start() {
  DMUON_CUDA_CHECK(
      cudaEventRecord(static_cast<cudaEvent_t>(start_), static_cast<cudaStream_t>(stream_)));
}
float EventTimer::stop_ms() {
  DMUON_CUDA_CHECK(
      cudaEventRecord(static_cast<cudaEvent_t>(stop_), static_cast<cudaStream_t>(stream_)));
  DMUON_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(stop_)));
  float ms = 0.0f;
  DMUON_CUDA_CHECK(
      cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start_), static_cast<cudaEvent_t>(stop_)));
  return ms;
}

namespace detail {

void gemm_ex(cublasHandle_t h, cudaDataType_t ab_type, cudaDataType_t c_type, bool ta, bool tb,
             std::size_t m, std::size_t n, std::size_t k, float alpha, const void* a, const void* b,
             float beta, void* c) {
  const int lda = static_cast<int>(ta ? m : k);
  const int ldb = static_cast<int>(tb ? k : n);
  DMUON_CUBLAS_CHECK(cublasGemmEx(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                  static_cast<int>(n), static_cast<int>(m), static_cast<int>(k),
                                  &alpha, b, ab_type, ldb, a, ab_type, lda, &beta, c, c_type,
                                  static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void syrk_full_f32(cublasHandle_t h, cudaStream_t s, bool trans, std::size_t n, std::size_t k,
                   const float* a, float* c) {
  // Row-major A (n×k) is the column-major Aᵀ (k×n): A·Aᵀ = Acmᵀ·Acm -> op T. With trans, the
  // row-major A (k×n) is column-major n×k and Aᵀ·A = Acm·Acmᵀ -> op N.
  const float one = 1.0f, zero = 0.0f;
  DMUON_CUBLAS_CHECK(cublasSsyrk(h, CUBLAS_FILL_MODE_UPPER, trans ? CUBLAS_OP_N : CUBLAS_OP_T,
                                 static_cast<int>(n), static_cast<int>(k), &one, a,
                                 static_cast<int>(trans ? n : k), &zero, c, static_cast<int>(n)));
  mirror_upper_kernel<<<grid_for(n * n), 256, 0, s>>>(c, n);
  DMUON_CUDA_CHECK_LAUNCH();
}

}  // namespace detail

void gemm(Context& ctx, Storage storage, bool trans_a, bool trans_b, std::size_t m, std::size_t n,
          std::size_t k, float alpha, const void* a, const void* b, float beta, void* c) {
  const cudaDataType_t t = detail::data_type(storage);
  detail::gemm_ex(ctx.impl().cublas, t, t, trans_a, trans_b, m, n, k, alpha, a, b, beta, c);
}

void convert_from_f32(Context& ctx, const float* src, void* dst, std::size_t n, Storage storage) {
  detail::dispatch(storage, [&](auto tag) {
    using T = typename decltype(tag)::type;
    convert_kernel<float, T>
        <<<detail::grid_for(n), 256, 0, stream_of(ctx)>>>(src, static_cast<T*>(dst), n);
  });
  DMUON_CUDA_CHECK_LAUNCH();
}

void convert_to_f32(Context& ctx, const void* src, float* dst, std::size_t n, Storage storage) {
  detail::dispatch(storage, [&](auto tag) {
    using T = typename decltype(tag)::type;
    convert_kernel<T, float>
        <<<detail::grid_for(n), 256, 0, stream_of(ctx)>>>(static_cast<const T*>(src), dst, n);
  });
  DMUON_CUDA_CHECK_LAUNCH();
}

std::size_t pack(Context& ctx, const ConstSlice* parts, std::size_t num_parts, float* dst,
                 std::size_t dst_size) {
  std::size_t total = 0;
  for (std::size_t i = 0; i < num_parts; ++i) total += parts[i].size;
  if (total > dst_size) {
    throw KernelError("cuda::pack: parts hold " + std::to_string(total) +
                      " floats but the packed buffer has room for " + std::to_string(dst_size));
  }
  std::size_t off = 0;
  for (std::size_t i = 0; i < num_parts; ++i) {
    if (parts[i].size == 0) continue;
    DMUON_CUDA_CHECK(cudaMemcpyAsync(dst + off, parts[i].data, parts[i].size * sizeof(float),
                                     cudaMemcpyDeviceToDevice, stream_of(ctx)));
    off += parts[i].size;
  }
  return total;
}

void unpack(Context& ctx, const float* src, std::size_t src_size, const Slice* parts,
            std::size_t num_parts) {
  std::size_t total = 0;
  for (std::size_t i = 0; i < num_parts; ++i) total += parts[i].size;
  if (total != src_size) {
    throw KernelError("cuda::unpack: parts hold " + std::to_string(total) +
                      " floats but the packed buffer has " + std::to_string(src_size));
  }
  std::size_t off = 0;
  for (std::size_t i = 0; i < num_parts; ++i) {
    if (parts[i].size == 0) continue;
    DMUON_CUDA_CHECK(cudaMemcpyAsync(parts[i].data, src + off, parts[i].size * sizeof(float),
                                     cudaMemcpyDeviceToDevice, stream_of(ctx)));
    off += parts[i].size;
  }
}

void average_gradient(Context& ctx, float* grad, std::size_t n, int num_contributors) {
  if (num_contributors < 1) {
    throw KernelError("cuda::average_gradient: number of contributors must be >= 1, got " +
                      std::to_string(num_contributors));
  }
  scale_kernel<<<detail::grid_for(n), 256, 0, stream_of(ctx)>>>(
      grad, n, 1.0f / static_cast<float>(num_contributors));
  DMUON_CUDA_CHECK_LAUNCH();
}

}  // namespace dmuon::kernels::cuda
