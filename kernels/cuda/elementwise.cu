// Elementwise CUDA kernels: conversions, the synthetic generator, the loss residual, Muon
// momentum/apply and AdamW. One pass each, fp32 arithmetic, grid-stride loops with 64-bit
// indices; the non-finite count rides on the same pass (detail::add_warp_count).
#include <cmath>
#include <string>

#include "kernels/cuda/detail.cuh"

namespace dmuon::kernels::cuda {

using detail::from_f;
using detail::grid_for;
using detail::kBlock;
using detail::to_f;

namespace {

/// Calls f(Tag<A>{}, Tag<B>{}) for the device types of a and b.
template <class F>
void dispatch2(Storage a, Storage b, F&& f) {
  detail::dispatch(a, [&](auto ta) { detail::dispatch(b, [&](auto tb) { f(ta, tb); }); });
}

template <class Tin, class Tout>
__global__ void __launch_bounds__(kBlock) convert_kernel(const Tin* in, Tout* out, std::size_t n) {
  DMUON_GRID_STRIDE(i, n) {
    out[i] = from_f<Tout>(to_f(in[i]));  // 16-bit → fp32 is exact: one rounding at most
  }
}

// Rows are cut into chunks of kRowChunk columns so that a few huge rows still fill the GPU;
// each (row, chunk) tile hashes its row key once.
constexpr std::size_t kRowChunk = std::size_t(kBlock) * 8;

template <class T>
__global__ void __launch_bounds__(kBlock)
    synthetic_rows_kernel(T* dst, std::size_t rows, std::size_t cols, std::size_t chunks,
                          std::uint64_t base, std::uint64_t first_sample) {
  const std::size_t tiles = rows * chunks;
  for (std::size_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const std::size_t r = tile / chunks;
    const std::size_t c0 = (tile - r * chunks) * kRowChunk;
    const std::size_t c1 = c0 + kRowChunk < cols ? c0 + kRowChunk : cols;
    const std::uint64_t key =
        detail::splitmix64(base ^ (first_sample + static_cast<std::uint64_t>(r)));
    T* row = dst + r * cols;
    for (std::size_t i = c0 + threadIdx.x; i < c1; i += blockDim.x) {
      row[i] = from_f<T>(detail::to_uniform(detail::splitmix64(key + i)));
    }
  }
}

template <class Tw, class Tg>
__global__ void __launch_bounds__(kBlock)
    synthetic_grad_none_kernel(const Tw* w, Tg* grad, std::size_t n, std::uint64_t key, float scale,
                               bool accumulate) {
  DMUON_GRID_STRIDE(i, n) {
    const float v =
        __fmul_rn(__fadd_rn(detail::to_uniform(detail::splitmix64(key + i)), to_f(w[i])), scale);
    grad[i] = from_f<Tg>(accumulate ? __fadd_rn(to_f(grad[i]), v) : v);
  }
}

template <class T>
__global__ void __launch_bounds__(kBlock)
    residual_scale_kernel(T* y, const T* t, std::size_t n, float scale) {
  DMUON_GRID_STRIDE(i, n) {
    y[i] = from_f<T>(__fmul_rn(__fsub_rn(to_f(y[i]), to_f(t[i])), scale));
  }
}

template <class Tg, class Tin>
__global__ void __launch_bounds__(kBlock)
    momentum_kernel(const Tg* g, float* buf, Tin* in, std::size_t n, bool first, float mu,
                    bool nesterov, unsigned long long* bad) {
  unsigned long long non_finite = 0;
  DMUON_GRID_STRIDE(i, n) {
    const float gi = to_f(g[i]);
    non_finite += !isfinite(gi);
    const float b = first ? gi : mu * buf[i] + gi;
    buf[i] = b;
    in[i] = from_f<Tin>(nesterov ? gi + mu * b : b);
  }
  detail::add_warp_count(bad, non_finite);
}

template <class T>
__global__ void __launch_bounds__(kBlock)
    apply_kernel(float* w, const T* o, std::size_t n, float decay, float step,
                 unsigned long long* bad) {
  unsigned long long non_finite = 0;
  DMUON_GRID_STRIDE(i, n) {
    const float v = decay * w[i] - step * to_f(o[i]);
    non_finite += !isfinite(v);
    w[i] = v;
  }
  detail::add_warp_count(bad, non_finite);
}

template <class Tg>
__global__ void __launch_bounds__(kBlock)
    adamw_kernel(float* w, const Tg* g, float* m, float* v, std::size_t n, float b1, float b2,
                 float eps, float decay, float step_size, float inv_sqrt_bc2,
                 unsigned long long* bad) {
  unsigned long long non_finite = 0;
  DMUON_GRID_STRIDE(i, n) {
    const float gi = to_f(g[i]);
    non_finite += !isfinite(gi);
    const float mi = b1 * m[i] + (1.0f - b1) * gi;
    const float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    w[i] = decay * w[i] - step_size * mi / (sqrtf(vi) * inv_sqrt_bc2 + eps);
  }
  detail::add_warp_count(bad, non_finite);
}

__global__ void __launch_bounds__(kBlock) scale_kernel(float* x, std::size_t n, float s) {
  DMUON_GRID_STRIDE(i, n) {
    x[i] *= s;
  }
}

template <class T>
__global__ void __launch_bounds__(kBlock)
    clip_sum_sq_kernel(const T* g, std::size_t n, double* sum_sq) {
  double local = 0;
  DMUON_GRID_STRIDE(i, n) {
    const double x = static_cast<double>(to_f(g[i]));
    local += x * x;
  }
  for (int off = 16; off > 0; off /= 2) local += __shfl_down_sync(0xffffffffu, local, off);
  if ((threadIdx.x & 31u) == 0u && local != 0.0) atomicAdd(sum_sq, local);
}

template <class T>
__global__ void __launch_bounds__(kBlock)
    clip_max_kernel(const T* g, std::size_t n, unsigned int* max_bits) {
  unsigned int local = 0;  // the bits of +0.0f
  DMUON_GRID_STRIDE(i, n) {
    const unsigned int b = __float_as_uint(fabsf(to_f(g[i])));
    local = b > local ? b : local;
  }
  for (int off = 16; off > 0; off /= 2) {
    const unsigned int o = __shfl_down_sync(0xffffffffu, local, off);
    local = o > local ? o : local;
  }
  if ((threadIdx.x & 31u) == 0u && local != 0u) atomicMax(max_bits, local);
}

__global__ void clip_finish_kernel(const ClipPartial* acc, bool inf_norm, float* scalar) {
  *scalar = inf_norm ? __uint_as_float(acc->max_bits) : static_cast<float>(acc->sum_sq);
}

template <class T>
__global__ void __launch_bounds__(kBlock)
    clip_scale_kernel(T* g, std::size_t n, const float* reduced, bool inf_norm, float max_norm) {
  const double r = static_cast<double>(*reduced);
  const float total = static_cast<float>(inf_norm ? r : sqrt(r));
  const float coef = fminf(max_norm / (total + 1e-6f), 1.0f);
  if (coef == 1.0f) return;  // clip_grad_norm_ multiplies by 1: nothing changes
  DMUON_GRID_STRIDE(i, n) {
    g[i] = from_f<T>(to_f(g[i]) * coef);
  }
}

}  // namespace

void clip_partial_reset(Context& ctx, ClipPartial* acc) {
  detail::require_ptr(acc, 1, "cuda::clip_partial_reset", "acc");
  DMUON_CUDA_CHECK(cudaMemsetAsync(acc, 0, sizeof(ClipPartial), detail::stream_of(ctx)));
}

void clip_partial_add(Context& ctx, const void* g, Storage type, std::size_t n, bool inf_norm,
                      ClipPartial* acc) {
  if (n == 0) return;
  detail::require_ptr(g, n, "cuda::clip_partial_add", "g");
  detail::require_ptr(acc, 1, "cuda::clip_partial_add", "acc");
  cudaStream_t s = detail::stream_of(ctx);
  detail::dispatch(type, [&](auto tg) {
    using T = typename decltype(tg)::type;
    if (inf_norm)
      clip_max_kernel<T>
          <<<grid_for(n), kBlock, 0, s>>>(static_cast<const T*>(g), n, &acc->max_bits);
    else
      clip_sum_sq_kernel<T>
          <<<grid_for(n), kBlock, 0, s>>>(static_cast<const T*>(g), n, &acc->sum_sq);
  });
  DMUON_CUDA_CHECK_LAUNCH();
}

void clip_partial_finish(Context& ctx, const ClipPartial* acc, bool inf_norm, float* scalar) {
  detail::require_ptr(acc, 1, "cuda::clip_partial_finish", "acc");
  detail::require_ptr(scalar, 1, "cuda::clip_partial_finish", "scalar");
  clip_finish_kernel<<<1, 1, 0, detail::stream_of(ctx)>>>(acc, inf_norm, scalar);
  DMUON_CUDA_CHECK_LAUNCH();
}

void clip_scale(Context& ctx, void* g, Storage type, std::size_t n, const float* reduced,
                bool inf_norm, double max_norm) {
  if (n == 0) return;
  detail::require_ptr(g, n, "cuda::clip_scale", "g");
  detail::require_ptr(reduced, 1, "cuda::clip_scale", "reduced");
  cudaStream_t s = detail::stream_of(ctx);
  detail::dispatch(type, [&](auto tg) {
    using T = typename decltype(tg)::type;
    clip_scale_kernel<T><<<grid_for(n), kBlock, 0, s>>>(static_cast<T*>(g), n, reduced, inf_norm,
                                                        static_cast<float>(max_norm));
  });
  DMUON_CUDA_CHECK_LAUNCH();
}

void convert(Context& ctx, const void* src, Storage src_type, void* dst, Storage dst_type,
             std::size_t n) {
  if (n == 0) return;
  detail::require_ptr(src, n, "cuda::convert", "src");
  detail::require_ptr(dst, n, "cuda::convert", "dst");
  cudaStream_t s = detail::stream_of(ctx);
  if (src_type == dst_type) {
    if (src != dst) {
      DMUON_CUDA_CHECK(
          cudaMemcpyAsync(dst, src, n * storage_bytes(src_type), cudaMemcpyDeviceToDevice, s));
    }
    return;
  }
  dispatch2(src_type, dst_type, [&](auto ti, auto to) {
    using Tin = typename decltype(ti)::type;
    using Tout = typename decltype(to)::type;
    convert_kernel<Tin, Tout>
        <<<grid_for(n), kBlock, 0, s>>>(static_cast<const Tin*>(src), static_cast<Tout*>(dst), n);
  });
  DMUON_CUDA_CHECK_LAUNCH();
}

void convert_from_f32(Context& ctx, const float* src, void* dst, std::size_t n, Storage storage) {
  convert(ctx, src, Storage::f32, dst, storage, n);
}

void convert_to_f32(Context& ctx, const void* src, float* dst, std::size_t n, Storage storage) {
  convert(ctx, src, storage, dst, Storage::f32, n);
}

void synthetic_rows(Context& ctx, void* dst, Storage dst_type, std::size_t rows, std::size_t cols,
                    std::uint64_t seed, std::uint64_t step, std::uint64_t first_sample,
                    std::uint64_t pid, std::uint64_t stream) {
  if (rows == 0 || cols == 0) return;
  detail::require_ptr(dst, rows * cols, "cuda::synthetic_rows", "dst");
  const std::size_t chunks = (cols + kRowChunk - 1) / kRowChunk;
  const std::uint64_t base = detail::row_base(seed, step, pid, stream);
  detail::dispatch(dst_type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    synthetic_rows_kernel<T><<<grid_for(rows * chunks, 1), kBlock, 0, detail::stream_of(ctx)>>>(
        static_cast<T*>(dst), rows, cols, chunks, base, first_sample);
  });
  DMUON_CUDA_CHECK_LAUNCH();
}

void synthetic_grad_none(Context& ctx, const void* w, Storage w_type, void* grad, Storage grad_type,
                         std::size_t n, std::uint64_t seed, std::uint64_t step, std::uint64_t pid,
                         std::uint64_t stream, float scale, bool accumulate) {
  if (n == 0) return;
  detail::require_ptr(w, n, "cuda::synthetic_grad_none", "w");
  detail::require_ptr(grad, n, "cuda::synthetic_grad_none", "grad");
  // row_key(seed, step, sample = 0, pid, stream)
  const std::uint64_t key =
      detail::splitmix64(detail::row_base(seed, step, pid, stream) ^ std::uint64_t{0});
  dispatch2(w_type, grad_type, [&](auto tw, auto tg) {
    using Tw = typename decltype(tw)::type;
    using Tg = typename decltype(tg)::type;
    synthetic_grad_none_kernel<Tw, Tg><<<grid_for(n), kBlock, 0, detail::stream_of(ctx)>>>(
        static_cast<const Tw*>(w), static_cast<Tg*>(grad), n, key, scale, accumulate);
  });
  DMUON_CUDA_CHECK_LAUNCH();
}

void residual_scale(Context& ctx, void* y, const void* t, Storage type, std::size_t n,
                    float scale) {
  if (n == 0) return;
  detail::require_ptr(y, n, "cuda::residual_scale", "y");
  detail::require_ptr(t, n, "cuda::residual_scale", "t");
  detail::dispatch(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    residual_scale_kernel<T><<<grid_for(n), kBlock, 0, detail::stream_of(ctx)>>>(
        static_cast<T*>(y), static_cast<const T*>(t), n, scale);
  });
  DMUON_CUDA_CHECK_LAUNCH();
}

void muon_momentum(Context& ctx, const void* grad, Storage grad_type, float* momentum,
                   void* ns_input, Storage ns_type, std::size_t n, long step, float mu,
                   bool nesterov, unsigned long long* bad) {
  if (step < 1) {
    throw KernelError("cuda::muon_momentum: step must be >= 1, got " + std::to_string(step));
  }
  if (n == 0) return;
  detail::require_ptr(grad, n, "cuda::muon_momentum", "grad");
  detail::require_ptr(momentum, n, "cuda::muon_momentum", "momentum");
  detail::require_ptr(ns_input, n, "cuda::muon_momentum", "ns_input");
  dispatch2(grad_type, ns_type, [&](auto tg, auto ti) {
    using Tg = typename decltype(tg)::type;
    using Ti = typename decltype(ti)::type;
    momentum_kernel<Tg, Ti><<<grid_for(n), kBlock, 0, detail::stream_of(ctx)>>>(
        static_cast<const Tg*>(grad), momentum, static_cast<Ti*>(ns_input), n, step <= 1, mu,
        nesterov, bad);
  });
  DMUON_CUDA_CHECK_LAUNCH();
}

void muon_apply(Context& ctx, float* weight, const void* update, Storage update_type, std::size_t n,
                float lr, float weight_decay, float scale, unsigned long long* bad) {
  if (n == 0) return;
  detail::require_ptr(weight, n, "cuda::muon_apply", "weight");
  detail::require_ptr(update, n, "cuda::muon_apply", "update");
  const float decay = 1.0f - lr * weight_decay;
  const float step = lr * scale;
  detail::dispatch(update_type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    apply_kernel<T><<<grid_for(n), kBlock, 0, detail::stream_of(ctx)>>>(
        weight, static_cast<const T*>(update), n, decay, step, bad);
  });
  DMUON_CUDA_CHECK_LAUNCH();
}

void adamw_step(Context& ctx, float* weight, const void* grad, Storage grad_type, float* exp_avg,
                float* exp_avg_sq, std::size_t n, long step, const AdamWConfig& config,
                unsigned long long* bad) {
  if (step < 1) {
    throw KernelError("cuda::adamw_step: step must be >= 1, got " + std::to_string(step));
  }
  if (n == 0) return;
  detail::require_ptr(weight, n, "cuda::adamw_step", "weight");
  detail::require_ptr(grad, n, "cuda::adamw_step", "grad");
  detail::require_ptr(exp_avg, n, "cuda::adamw_step", "exp_avg");
  detail::require_ptr(exp_avg_sq, n, "cuda::adamw_step", "exp_avg_sq");
  // Bias corrections in double (β2ᵗ loses digits in fp32 for large t), applied in fp32; the
  // same constants as host::adamw_step.
  const double bc1 = 1.0 - std::pow(static_cast<double>(config.beta1), static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(config.beta2), static_cast<double>(step));
  const float decay = 1.0f - config.lr * config.weight_decay;
  const float step_size = static_cast<float>(config.lr / bc1);
  const float inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  detail::dispatch(grad_type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    adamw_kernel<T><<<grid_for(n), kBlock, 0, detail::stream_of(ctx)>>>(
        weight, static_cast<const T*>(grad), exp_avg, exp_avg_sq, n, config.beta1, config.beta2,
        config.eps, decay, step_size, inv_sqrt_bc2, bad);
  });
  DMUON_CUDA_CHECK_LAUNCH();
}

void average_gradient(Context& ctx, float* grad, std::size_t n, int num_contributors) {
  if (num_contributors < 1) {
    throw KernelError("cuda::average_gradient: number of contributors must be >= 1, got " +
                      std::to_string(num_contributors));
  }
  if (n == 0) return;
  detail::require_ptr(grad, n, "cuda::average_gradient", "grad");
  scale_kernel<<<grid_for(n), kBlock, 0, detail::stream_of(ctx)>>>(
      grad, n, 1.0f / static_cast<float>(num_contributors));
  DMUON_CUDA_CHECK_LAUNCH();
}

}  // namespace dmuon::kernels::cuda
