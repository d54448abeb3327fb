// CUDA Newton–Schulz (direct and Gram forms), Muon and AdamW. Same algorithm and orientation
// logic as kernels/host/newton_schulz.cpp: the iterated matrix is the wide X (m×n, m <= n),
// stored in the caller's orientation, with the transpose folded into the GEMM flags.
// Storage f32/bf16/f16 for X and the direct form's m×m products; the Gram form keeps its m×m
// matrices (R, P, Q) in fp32 since their conditioning is squared.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "kernels/cuda/detail.cuh"

namespace dmuon::kernels::cuda {

using detail::from_f;
using detail::grid_for;
using detail::to_f;

struct NsWorkspace::Impl {
  std::size_t rows = 0, cols = 0;
  Storage storage = Storage::f32;
  // storage-typed: x, xn (rows*cols), a, b, qs (m*m), muon_in, muon_out (rows*cols)
  void *x = nullptr, *xn = nullptr, *a = nullptr, *b = nullptr, *qs = nullptr;
  void *muon_in = nullptr, *muon_out = nullptr;
  // fp32 m*m for the Gram form
  float *r = nullptr, *p = nullptr, *q = nullptr, *t = nullptr, *u = nullptr;
  double* sumsq = nullptr;       // device scalar
  double* host_sumsq = nullptr;  // pinned
  ~Impl() {
    for (void* ptr : {x, xn, a, b, qs, muon_in, muon_out}) device_free(ptr);
    for (float* ptr : {r, p, q, t, u}) device_free(ptr);
    device_free(sumsq);
    if (host_sumsq) cudaFreeHost(host_sumsq);
  }
};

NsWorkspace::NsWorkspace(std::size_t rows, std::size_t cols, Storage storage)
    : impl_(std::make_unique<Impl>()) {
  if (rows == 0 || cols == 0) {
    throw KernelError("cuda::NsWorkspace: shape must be positive, got " + std::to_string(rows) +
                      "x" + std::to_string(cols));
  }
  auto& w = *impl_;
  w.rows = rows;
  w.cols = cols;
  w.storage = storage;
  const std::size_t es = storage_bytes(storage), mn = rows * cols, m = std::min(rows, cols);
  w.x = device_alloc(mn * es);
  w.xn = device_alloc(mn * es);
  w.a = device_alloc(m * m * es);
  w.b = device_alloc(m * m * es);
  w.qs = device_alloc(m * m * es);
  w.muon_in = device_alloc(mn * es);
  w.muon_out = device_alloc(mn * es);
  for (float** ptr : {&w.r, &w.p, &w.q, &w.t, &w.u}) {
    *ptr = static_cast<float*>(device_alloc(m * m * sizeof(float)));
  }
  w.sumsq = static_cast<double*>(device_alloc(sizeof(double)));
  DMUON_CUDA_CHECK(cudaMallocHost(&w.host_sumsq, sizeof(double)));
}

NsWorkspace::~NsWorkspace() = default;
std::size_t NsWorkspace::rows() const {
  return impl_->rows;
}
std::size_t NsWorkspace::cols() const {
  return impl_->cols;
}
Storage NsWorkspace::storage() const {
  return impl_->storage;
}

namespace {

#define DMUON_GRID_STRIDE(i, n)                                                     \
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < (n); \
       i += std::size_t(gridDim.x) * blockDim.x)

// Sum of squares in double (exact for any fp32 input, overflow-free: a non-finite sum means
// non-finite input), warp-reduced, one atomic per warp.
template <class T>
__global__ void sumsq_kernel(const T* x, std::size_t n, double* out) {
  double acc = 0.0;
  DMUON_GRID_STRIDE(i, n) {
    const double v = to_f(x[i]);
    acc += v * v;
  }
  for (int off = 16; off > 0; off /= 2) acc += __shfl_down_sync(0xffffffffu, acc, off);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, acc);
}

template <class T>
__global__ void normalise_kernel(const T* in, T* out, std::size_t n, const double* sumsq,
                                 float eps) {
  const float inv = 1.0f / (static_cast<float>(sqrt(*sumsq)) + eps);
  DMUON_GRID_STRIDE(i, n) {
    out[i] = from_f<T>(to_f(in[i]) * inv);
  }
}

// B (already c·A²) += b·A + a·I, row-major m×m (diagonal is the same in either layout).
template <class T>
__global__ void poly_direct_kernel(const T* A, T* B, std::size_t m, float a, float b) {
  DMUON_GRID_STRIDE(idx, m * m) {
    float v = to_f(B[idx]) + b * to_f(A[idx]);
    if (idx / m == idx % m) v += a;
    B[idx] = from_f<T>(v);
  }
}

__global__ void poly_gram_kernel(const float* r, const float* r2, float* p, std::size_t m, float a,
                                 float b, float c) {
  DMUON_GRID_STRIDE(idx, m * m) {
    float v = b * r[idx] + c * r2[idx];
    if (idx / m == idx % m) v += a;
    p[idx] = v;
  }
}

__global__ void symmetrize_kernel(float* r, std::size_t m) {
  DMUON_GRID_STRIDE(idx, m * m) {
    const std::size_t i = idx / m, j = idx % m;
    if (i < j) {
      const float v = 0.5f * (r[idx] + r[j * m + i]);
      r[idx] = v;
      r[j * m + i] = v;
    }
  }
}

__global__ void count_non_finite_kernel(const float* x, std::size_t n, unsigned long long* bad) {
  unsigned long long local = 0;
  DMUON_GRID_STRIDE(i, n) {
    if (!isfinite(x[i])) ++local;
  }
  if (local) atomicAdd(bad, local);
}

template <class T>
__global__ void momentum_kernel(const float* g, float* buf, T* in, std::size_t n, bool first,
                                float mu, bool nesterov) {
  DMUON_GRID_STRIDE(i, n) {
    const float gi = g[i];
    const float b = first ? gi : mu * buf[i] + gi;
    buf[i] = b;
    in[i] = from_f<T>(nesterov ? gi + mu * b : b);
  }
}

template <class T>
__global__ void apply_kernel(float* w, const T* o, std::size_t n, float decay, float step) {
  DMUON_GRID_STRIDE(i, n) {
    w[i] = decay * w[i] - step * to_f(o[i]);
  }
}

__global__ void adamw_kernel(float* w, const float* g, float* m, float* v, std::size_t n, float b1,
                             float b2, float eps, float decay, float step_size,
                             float inv_sqrt_bc2) {
  DMUON_GRID_STRIDE(i, n) {
    const float gi = g[i];
    const float mi = b1 * m[i] + (1.0f - b1) * gi;
    const float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    w[i] = decay * w[i] - step_size * mi / (sqrtf(vi) * inv_sqrt_bc2 + eps);
  }
}

std::string quoted(std::string_view name) {
  return "'" + std::string(name.empty() ? std::string_view("<unnamed>") : name) + "'";
}

void check_shape(const char* kernel, std::size_t rows, std::size_t cols, const NsWorkspace& ws,
                 std::string_view name) {
  if (rows == 0 || cols == 0 || rows != ws.rows() || cols != ws.cols()) {
    throw KernelError(std::string(kernel) + ": parameter " + quoted(name) + " is " +
                      std::to_string(rows) + "x" + std::to_string(cols) + " but the workspace is " +
                      std::to_string(ws.rows()) + "x" + std::to_string(ws.cols()));
  }
}

// Throws naming the parameter when g (fp32, device) holds NaN/Inf. Synchronises the stream.
void check_finite_f32(Context& ctx, const float* g, std::size_t n, const char* kernel,
                      std::string_view name) {
  Context::Impl& w = ctx.impl();
  cudaStream_t s = w.stream;
  DMUON_CUDA_CHECK(cudaMemsetAsync(w.bad, 0, sizeof(unsigned long long), s));
  count_non_finite_kernel<<<grid_for(n), 256, 0, s>>>(g, n, w.bad);
  DMUON_CUDA_CHECK_LAUNCH();
  DMUON_CUDA_CHECK(
      cudaMemcpyAsync(w.host_bad, w.bad, sizeof(unsigned long long), cudaMemcpyDeviceToHost, s));
  DMUON_CUDA_CHECK(cudaStreamSynchronize(s));
  if (*w.host_bad != 0) {
    throw KernelError(std::string(kernel) + ": gradient of parameter " + quoted(name) + " has " +
                      std::to_string(*w.host_bad) + " non-finite value(s) of " + std::to_string(n));
  }
}

struct Shape {
  std::size_t m, n;
  bool trans;
};

template <class T>
void ns_impl(Context& ctx, const T* g, T* out, const Shape& s, const NsConfig& cfg,
             NsWorkspace::Impl& w, std::string_view name) {
  cudaStream_t st = ctx.impl().stream;
  cublasHandle_t h = ctx.impl().cublas;
  const cudaDataType_t dt = detail::data_type(w.storage);
  const std::size_t m = s.m, n = s.n, count = m * n;
  T* x = static_cast<T*>(w.x);
  T* xn = static_cast<T*>(w.xn);

  // Normalise (fp32 norm); the finiteness check rides on the same reduction.
  DMUON_CUDA_CHECK(cudaMemsetAsync(w.sumsq, 0, sizeof(double), st));
  sumsq_kernel<T><<<grid_for(count), 256, 0, st>>>(g, count, w.sumsq);
  DMUON_CUDA_CHECK_LAUNCH();
  normalise_kernel<T><<<grid_for(count), 256, 0, st>>>(g, x, count, w.sumsq, cfg.eps);
  DMUON_CUDA_CHECK_LAUNCH();
  DMUON_CUDA_CHECK(
      cudaMemcpyAsync(w.host_sumsq, w.sumsq, sizeof(double), cudaMemcpyDeviceToHost, st));
  DMUON_CUDA_CHECK(cudaStreamSynchronize(st));
  if (!std::isfinite(*w.host_sumsq)) {
    throw KernelError("cuda::newton_schulz: input of parameter " + quoted(name) +
                      " has non-finite values");
  }

  // X Xᵀ (out type c_type) and P·X in the stored orientation.
  auto gram = [&](const T* src, void* dst, cudaDataType_t c_type) {
    if (!s.trans) {
      detail::gemm_ex(h, dt, c_type, false, true, m, m, n, 1.0f, src, src, 0.0f, dst);
    } else {
      detail::gemm_ex(h, dt, c_type, true, false, m, m, n, 1.0f, src, src, 0.0f, dst);
    }
  };
  auto apply = [&](const void* p, const T* src, T* dst) {
    if (!s.trans) {
      detail::gemm_ex(h, dt, dt, false, false, m, n, m, 1.0f, p, src, 0.0f, dst);
    } else {
      detail::gemm_ex(h, dt, dt, false, true, n, m, m, 1.0f, src, p, 0.0f, dst);
    }
  };
  const std::size_t steps = static_cast<std::size_t>(cfg.steps);

  if (cfg.variant == NsVariant::direct) {
    T* A = static_cast<T*>(w.a);
    T* B = static_cast<T*>(w.b);
    for (std::size_t k = 0; k < steps; ++k) {
      const NsCoefficients co = ns_step_coefficients(cfg.coefficients, static_cast<int>(k));
      gram(x, A, dt);
      detail::gemm_ex(h, dt, dt, false, false, m, m, m, static_cast<float>(co.c), A, A, 0.0f, B);
      poly_direct_kernel<T><<<grid_for(m * m), 256, 0, st>>>(A, B, m, static_cast<float>(co.a),
                                                             static_cast<float>(co.b));
      DMUON_CUDA_CHECK_LAUNCH();
      apply(B, x, (k + 1 == steps) ? out : xn);
      std::swap(x, xn);
    }
    return;
  }

  // Gram form (fp32 m×m recursion), see kernels/host/newton_schulz.cpp for the algebra.
  float *r = w.r, *p = w.p, *q = w.q, *t = w.t, *u = w.u;
  auto gram_f32 = [&](const T* src) {
    if constexpr (std::is_same_v<T, float>) {
      detail::syrk_full_f32(h, st, s.trans, m, n, src, r);
    } else {
      gram(src, r, CUDA_R_32F);
    }
  };
  auto q_to_storage = [&]() { convert_from_f32(ctx, q, w.qs, m * m, w.storage); };
  auto sgemm = [&](const float* a, const float* b, float* c) {
    detail::gemm_ex(h, CUDA_R_32F, CUDA_R_32F, false, false, m, m, m, 1.0f, a, b, 0.0f, c);
  };
  gram_f32(x);
  bool q_identity = true;
  for (std::size_t k = 0; k < steps; ++k) {
    if (k == static_cast<std::size_t>(kGramRestartStep) && !q_identity) {
      q_to_storage();
      apply(w.qs, x, xn);
      std::swap(x, xn);
      gram_f32(x);
      q_identity = true;
    }
    const NsCoefficients co = ns_step_coefficients(cfg.coefficients, static_cast<int>(k));
    detail::syrk_full_f32(h, st, false, m, m, r, t);  // R² = R Rᵀ
    poly_gram_kernel<<<grid_for(m * m), 256, 0, st>>>(
        r, t, p, m, static_cast<float>(co.a), static_cast<float>(co.b), static_cast<float>(co.c));
    DMUON_CUDA_CHECK_LAUNCH();
    const bool last = (k + 1 == steps);
    const bool restart_next = (k + 1 == static_cast<std::size_t>(kGramRestartStep));
    if (!last && !restart_next) {
      detail::syrk_full_f32(h, st, false, m, m, p, t);  // P²
      sgemm(t, r, u);                                   // R <- P² R
      std::swap(r, u);
      symmetrize_kernel<<<grid_for(m * m), 256, 0, st>>>(r, m);
      DMUON_CUDA_CHECK_LAUNCH();
    }
    if (q_identity) {
      std::swap(q, p);
      q_identity = false;
    } else {
      sgemm(p, q, t);  // Q <- P Q
      std::swap(q, t);
    }
  }
  q_to_storage();
  apply(w.qs, x, out);
}

}  // namespace

void newton_schulz(Context& ctx, const void* g, void* out, std::size_t rows, std::size_t cols,
                   Storage storage, const NsConfig& config, NsWorkspace& workspace,
                   std::string_view name) {
  check_shape("cuda::newton_schulz", rows, cols, workspace, name);
  if (storage != workspace.storage()) {
    throw KernelError("cuda::newton_schulz: parameter " + quoted(name) + " is " +
                      std::string(to_string(storage)) + " but the workspace is " +
                      std::string(to_string(workspace.storage())));
  }
  if (config.steps < 1) {
    throw KernelError("cuda::newton_schulz: steps must be >= 1 for parameter " + quoted(name));
  }
  const Shape s{std::min(rows, cols), std::max(rows, cols), rows > cols};
  detail::dispatch(storage, [&](auto tag) {
    using T = typename decltype(tag)::type;
    ns_impl<T>(ctx, static_cast<const T*>(g), static_cast<T*>(out), s, config, workspace.impl(),
               name);
  });
}

void muon_step(Context& ctx, float* weight, const float* grad, float* momentum_buf,
               std::size_t rows, std::size_t cols, long step, const MuonConfig& config,
               NsWorkspace& workspace, std::string_view name) {
  check_shape("cuda::muon_step", rows, cols, workspace, name);
  if (step < 1) {
    throw KernelError("cuda::muon_step: step must be >= 1 for parameter " + quoted(name));
  }
  auto& w = workspace.impl();
  cudaStream_t st = ctx.impl().stream;
  const std::size_t n = rows * cols;
  check_finite_f32(ctx, grad, n, "cuda::muon_step", name);  // before any state changes
  const float decay = 1.0f - config.lr * config.weight_decay;
  const float upd = config.lr * muon_scale(rows, cols);
  detail::dispatch(w.storage, [&](auto tag) {
    using T = typename decltype(tag)::type;
    momentum_kernel<T><<<grid_for(n), 256, 0, st>>>(grad, momentum_buf, static_cast<T*>(w.muon_in),
                                                    n, step <= 1, config.momentum, config.nesterov);
    DMUON_CUDA_CHECK_LAUNCH();
    ns_impl<T>(ctx, static_cast<const T*>(w.muon_in), static_cast<T*>(w.muon_out),
               Shape{std::min(rows, cols), std::max(rows, cols), rows > cols}, config.ns, w, name);
    apply_kernel<T>
        <<<grid_for(n), 256, 0, st>>>(weight, static_cast<const T*>(w.muon_out), n, decay, upd);
    DMUON_CUDA_CHECK_LAUNCH();
  });
}

void adamw_step(Context& ctx, float* weight, const float* grad, float* exp_avg, float* exp_avg_sq,
                std::size_t n, long step, const AdamWConfig& config, std::string_view name) {
  if (step < 1) {
    throw KernelError("cuda::adamw_step: step must be >= 1 for parameter " + quoted(name));
  }
  cudaStream_t st = ctx.impl().stream;
  check_finite_f32(ctx, grad, n, "cuda::adamw_step", name);  // before any state changes
  const double bc1 = 1.0 - std::pow(static_cast<double>(config.beta1), static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(config.beta2), static_cast<double>(step));
  adamw_kernel<<<grid_for(n), 256, 0, st>>>(
      weight, grad, exp_avg, exp_avg_sq, n, config.beta1, config.beta2, config.eps,
      1.0f - config.lr * config.weight_decay, static_cast<float>(config.lr / bc1),
      static_cast<float>(1.0 / std::sqrt(bc2)));
  DMUON_CUDA_CHECK_LAUNCH();
}

}  // namespace dmuon::kernels::cuda
