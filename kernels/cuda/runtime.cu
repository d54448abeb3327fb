// CUDA runtime pieces: context, memory, non-finite counters, events, GEMM wrappers.
#include <string>

#include "kernels/cuda/detail.cuh"

namespace dmuon::kernels::cuda {

namespace {
// cuBLAS's recommended workspace on Hopper (smaller GPUs need less; 32 MiB covers all).
constexpr std::size_t kCublasWorkspaceBytes = std::size_t(32) << 20;
}  // namespace

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

std::string device_name(int device) {
  cudaDeviceProp prop{};
  const cudaError_t err = cudaGetDeviceProperties(&prop, device);
  if (err != cudaSuccess)
    throw KernelError(std::string("cudaGetDeviceProperties failed: ") + cudaGetErrorString(err));
  return prop.name;
}

Context::Context(void* stream) : impl_(std::make_unique<Impl>()) {
  Impl& c = *impl_;
  c.stream = static_cast<cudaStream_t>(stream);
  try {
    DMUON_CUBLAS_CHECK(cublas_library().create(&c.cublas));
    DMUON_CUBLAS_CHECK(cublas_library().set_stream(c.cublas, c.stream));
    // After cublasSetStream, which resets the handle to cuBLAS's shared default pool.
    c.cublas_workspace = device_alloc(kCublasWorkspaceBytes);
    DMUON_CUBLAS_CHECK(
        cublas_library().set_workspace(c.cublas, c.cublas_workspace, kCublasWorkspaceBytes));
    // Plain fp32 math for fp32 storage (no TF32): the host path is the oracle. 16-bit inputs
    // with CUBLAS_COMPUTE_32F use the tensor cores regardless. No reduced-precision reductions:
    // without this flag cuBLAS may sum split-K partials of a 16-bit output in 16 bits, beyond
    // the fp32-accumulation bounds dmuon_cuda_check holds the GEMMs to.
    DMUON_CUBLAS_CHECK(cublas_library().set_math_mode(
        c.cublas, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                            CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
  } catch (...) {
    if (c.cublas) cublas_library().destroy(c.cublas);
    device_free(c.cublas_workspace);
    throw;
  }
}

Context::~Context() {
  if (!impl_) return;
  if (impl_->cublas) cublas_library().destroy(impl_->cublas);
  device_free(impl_->cublas_workspace);
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
  // A pageable H2D cudaMemcpy may return before its DMA lands, and non-blocking streams are
  // not ordered after the legacy stream: wait, so any stream may read dst afterwards.
  DMUON_CUDA_CHECK(cudaDeviceSynchronize());
}
void copy_to_host(void* dst, const void* src, std::size_t bytes) {
  DMUON_CUDA_CHECK(cudaDeviceSynchronize());  // after work on any stream, not just the legacy one
  DMUON_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

// ---- counters ----------------------------------------------------------------------------------

unsigned long long* alloc_counters(std::size_t n) {
  auto* p = static_cast<unsigned long long*>(device_alloc(n * sizeof(unsigned long long)));
  try {
    DMUON_CUDA_CHECK(cudaMemset(p, 0, n * sizeof(unsigned long long)));
    DMUON_CUDA_CHECK(cudaDeviceSynchronize());  // cudaMemset is async: order it before any stream
  } catch (...) {
    device_free(p);
    throw;
  }
  return p;
}

void free_counters(unsigned long long* counters) noexcept {
  device_free(counters);
}

void zero_counters(Context& ctx, unsigned long long* counters, std::size_t n) {
  if (n == 0) return;
  detail::require_ptr(counters, n, "cuda::zero_counters", "counters");
  DMUON_CUDA_CHECK(
      cudaMemsetAsync(counters, 0, n * sizeof(unsigned long long), detail::stream_of(ctx)));
}

void read_counters(Context& ctx, const unsigned long long* counters, std::size_t n,
                   unsigned long long* host_out) {
  if (n == 0) return;
  detail::require_ptr(counters, n, "cuda::read_counters", "counters");
  detail::require_ptr(host_out, n, "cuda::read_counters", "host_out");
  cudaStream_t s = detail::stream_of(ctx);
  DMUON_CUDA_CHECK(cudaMemcpyAsync(host_out, counters, n * sizeof(unsigned long long),
                                   cudaMemcpyDeviceToHost, s));
  DMUON_CUDA_CHECK(cudaStreamSynchronize(s));
}

// ---- events ------------------------------------------------------------------------------------

EventTimer::EventTimer(Context& ctx) : stream_(ctx.stream()) {
  cudaEvent_t a = nullptr, b = nullptr;
  DMUON_CUDA_CHECK(cudaEventCreate(&a));
  start_ = a;
  DMUON_CUDA_CHECK(cudaEventCreate(&b));
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

// ---- GEMM --------------------------------------------------------------------------------------

namespace detail {

namespace {
cublasOperation_t op(bool trans) {
  return trans ? CUBLAS_OP_T : CUBLAS_OP_N;
}
int as_int(std::size_t v) {
  return static_cast<int>(v);
}
}  // namespace

void check_gemm_dims(const plan::RowMajorGemm& g, const char* call) {
  for (const std::size_t v : {g.m, g.n, g.k, g.lda, g.ldb, g.ldc}) {
    if (v > static_cast<std::size_t>(INT_MAX)) {
      throw KernelError(std::string(call) + ": GEMM dimension " + std::to_string(v) +
                        " exceeds cuBLAS's 32-bit int (m=" + std::to_string(g.m) +
                        ", n=" + std::to_string(g.n) + ", k=" + std::to_string(g.k) + ")");
    }
  }
}

void gemm_rm(cublasHandle_t h, cudaDataType_t ab_type, cudaDataType_t c_type,
             const plan::RowMajorGemm& g, float alpha, const void* a, const void* b, float beta,
             void* c) {
  const plan::ColumnMajorGemm cm = plan::to_column_major(g);
  DMUON_CUBLAS_CHECK(cublas_library().gemm_ex(
      h, op(cm.trans_first), op(cm.trans_second), as_int(cm.m), as_int(cm.n), as_int(cm.k), &alpha,
      b, ab_type, as_int(cm.ld_first), a, ab_type, as_int(cm.ld_second), &beta, c, c_type,
      as_int(cm.ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void gemm_batched_rm(cublasHandle_t h, cudaDataType_t ab_type, cudaDataType_t c_type,
                     const plan::RowMajorGemm& g, float alpha, const void* const* a,
                     const void* const* b, float beta, void* const* c, int batch) {
  const plan::ColumnMajorGemm cm = plan::to_column_major(g);
  DMUON_CUBLAS_CHECK(cublas_library().gemm_batched_ex(
      h, op(cm.trans_first), op(cm.trans_second), as_int(cm.m), as_int(cm.n), as_int(cm.k), &alpha,
      b, ab_type, as_int(cm.ld_first), a, ab_type, as_int(cm.ld_second), &beta, c, c_type,
      as_int(cm.ldc), batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace detail

void gemm(Context& ctx, Storage storage, bool trans_a, bool trans_b, std::size_t m, std::size_t n,
          std::size_t k, float alpha, const void* a, const void* b, float beta, void* c) {
  gemm(ctx, storage, storage, trans_a, trans_b, m, n, k, alpha, a, b, beta, c);
}

void gemm(Context& ctx, Storage storage, Storage c_storage, bool trans_a, bool trans_b,
          std::size_t m, std::size_t n, std::size_t k, float alpha, const void* a, const void* b,
          float beta, void* c) {
  if (m == 0 || n == 0) return;
  if (c_storage != storage && c_storage != Storage::f32)
    throw KernelError("cuda::gemm: a 16-bit c needs a and b of the same type");
  const plan::RowMajorGemm g = plan::dense_gemm(trans_a, trans_b, m, n, k);
  detail::check_gemm_dims(g, "cuda::gemm");
  detail::require_ptr(a, m * k, "cuda::gemm", "a");
  detail::require_ptr(b, k * n, "cuda::gemm", "b");
  detail::require_ptr(c, m * n, "cuda::gemm", "c");
  detail::gemm_rm(ctx.impl().cublas, detail::data_type(storage), detail::data_type(c_storage), g,
                  alpha, a, b, beta, c);
}

}  // namespace dmuon::kernels::cuda
