#pragma once
// CUDA/cuBLAS kernels for the engine's CUDA executor: same math as the host kernels, device
// pointers, a Context (stream + cuBLAS handle) first. No CUDA or Kokkos types appear here:
// streams are passed as `void*` (a cudaStream_t), so callers compile without nvcc and never
// #ifdef — a build without CUDA links a stub whose functions throw
// KernelError("CUDA kernels not compiled ...").
//
// The no-sync contract. Every entry point that takes a Context only ENQUEUES work on the
// context's stream: no stream or device synchronisation, no device→host copy, no allocation
// (the one documented exception: the first muon_step on a workspace allocates its scratch).
// Calls on one stream run in order; ordering across streams is the caller's (CUDA events).
// Non-finite values are counted on the device instead of thrown: kernels that take
// `unsigned long long* bad` (a DEVICE counter, nullptr = do not count) add the number of
// non-finite values they saw, fused into their main pass (one atomic per warp at most, and
// none when the warp saw nothing). read_counters() is THE synchronising call: once per step.
// Host-side argument checks (shapes, null pointers, step >= 1) still throw KernelError at once.
//
// Row-major storage like the host API. Element types (Storage = kernels::Dtype): f32, bf16 or
// f16; arithmetic is fp32 everywhere (GEMMs accumulate in fp32 through cublasGemmEx with
// CUBLAS_COMPUTE_32F; fp32 storage never uses TF32), fp32→16-bit rounding is round-to-nearest-
// even. Optimizer state (weights, momentum, AdamW moments) is fp32.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "kernels/adamw.hpp"
#include "kernels/cuda/ns_numerics.hpp"
#include "kernels/dtype.hpp"
#include "kernels/muon.hpp"
#include "kernels/ns_coefficients.hpp"

namespace dmuon::kernels::cuda {

using Storage = dmuon::kernels::Dtype;

/// Bytes per element / "f32" | "bf16" | "f16" (dtype_bytes / dtype_name under their old names).
inline std::size_t storage_bytes(Storage storage) {
  return dtype_bytes(storage);
}
inline std::string_view to_string(Storage storage) {
  return dtype_name(storage);
}

/// True when this build contains the CUDA kernels (DMUON_ENABLE_CUDA=ON).
bool compiled();

/// Number of visible GPUs. Throws KernelError carrying cudaGetDeviceCount's message when the
/// runtime reports an error (e.g. no driver / no GPU), so callers can say so clearly.
int device_count();

/// The name of GPU `device` (e.g. "NVIDIA H200"), for provenance. Throws KernelError like
/// device_count() when the runtime cannot say.
std::string device_name(int device);

/// A stream (borrowed; the legacy default stream when null), a cuBLAS handle bound to it and
/// the handle's own 32 MiB cuBLAS workspace (so contexts on different streams never share one,
/// and cuBLAS never allocates during stream capture). Use one Context per stream.
class Context {
 public:
  explicit Context(void* stream = nullptr);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  void* stream() const;
  /// Blocks the host until the stream is idle (tests, benchmarks; not for the step loop).
  void synchronize() const;
  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// ---- non-finite counters ------------------------------------------------------------------------

/// n device counters, zeroed (waits for the device: setup, not the step loop).
/// free_counters(nullptr) is a no-op. DeviceCounters below owns such an array.
unsigned long long* alloc_counters(std::size_t n);
void free_counters(unsigned long long* counters) noexcept;

/// Enqueues counters[0..n) = 0 on the context's stream (async memset).
void zero_counters(Context& ctx, unsigned long long* counters, std::size_t n);

/// THE synchronising call: enqueues the copy of counters[0..n) into host_out (pageable or
/// pinned host memory) and waits for the stream, so host_out holds everything the stream's
/// earlier work counted. Call it once per training step.
void read_counters(Context& ctx, const unsigned long long* counters, std::size_t n,
                   unsigned long long* host_out);

/// RAII owner of alloc_counters(n).
class DeviceCounters {
 public:
  explicit DeviceCounters(std::size_t n) : n_(n), ptr_(alloc_counters(n)) {}
  ~DeviceCounters() { free_counters(ptr_); }
  DeviceCounters(const DeviceCounters&) = delete;
  DeviceCounters& operator=(const DeviceCounters&) = delete;
  unsigned long long* data() const { return ptr_; }
  /// Device address of counter i (no bounds check beyond the caller's).
  unsigned long long* at(std::size_t i) const { return ptr_ + i; }
  std::size_t size() const { return n_; }

 private:
  std::size_t n_;
  unsigned long long* ptr_;
};

// ---- elementwise entry points (async on ctx's stream; n == 0 is a no-op) ------------------------

/// dst = src converted, any pair of types; fp32/bf16/f16 → narrower types round to nearest
/// even (NaN stays NaN, overflow becomes ±Inf); the same type is a device-to-device copy.
/// src and dst must not overlap unless they are the same pointer with the same type.
void convert(Context& ctx, const void* src, Storage src_type, void* dst, Storage dst_type,
             std::size_t n);
/// Thin wrappers of convert().
void convert_from_f32(Context& ctx, const float* src, void* dst, std::size_t n, Storage storage);
void convert_to_f32(Context& ctx, const void* src, float* dst, std::size_t n, Storage storage);

/// Synthetic data rows, bit-identical in fp32 to the host generator (src/dmuon/engine/
/// step/synthetic.cpp), then rounded to dst_type: row r (0 <= r < rows) of the row-major rows×cols
/// dst is to_uniform(splitmix64(key + i)), i = 0..cols-1, with
/// key = row_key(seed, step, first_sample + r, pid, stream). All integer arithmetic wraps.
void synthetic_rows(Context& ctx, void* dst, Storage dst_type, std::size_t rows, std::size_t cols,
                    std::uint64_t seed, std::uint64_t step, std::uint64_t first_sample,
                    std::uint64_t pid, std::uint64_t stream);

/// The gradient of --compute none: grad[i] = to_uniform(splitmix64(row_key(seed, step, 0, pid,
/// stream) + i)) + float(w[i]), one fp32 addition, rounded to grad_type (bit-identical to the
/// host in fp32). With --accum K the value is multiplied by scale = 1/K and, when
/// `accumulate`, added (in fp32) to what grad holds, as the host's micro-steps do.
void synthetic_grad_none(Context& ctx, const void* w, Storage w_type, void* grad, Storage grad_type,
                         std::size_t n, std::uint64_t seed, std::uint64_t step, std::uint64_t pid,
                         std::uint64_t stream, float scale = 1.0f, bool accumulate = false);

/// y = (y − t)·scale in place (y and t of one type, fp32 arithmetic: the loss gradient dY).
void residual_scale(Context& ctx, void* y, const void* t, Storage type, std::size_t n, float scale);

/// Muon momentum (SPEC §7): buf = (step <= 1) ? g : mu·buf + g; ns_input = nesterov ? g + mu·buf
/// : buf, rounded to ns_type. Adds the number of non-finite g to *bad.
void muon_momentum(Context& ctx, const void* grad, Storage grad_type, float* momentum,
                   void* ns_input, Storage ns_type, std::size_t n, long step, float mu,
                   bool nesterov, unsigned long long* bad);

/// weight = (1 − lr·wd)·weight − lr·scale·update. Adds the number of non-finite new weights to
/// *bad.
void muon_apply(Context& ctx, float* weight, const void* update, Storage update_type, std::size_t n,
                float lr, float weight_decay, float scale, unsigned long long* bad);

/// One PyTorch AdamW step on n fp32 elements (same formula as host::adamw_step; bias
/// corrections in double on the host). Adds the number of non-finite g to *bad. The state is
/// updated regardless: a non-zero count means the step failed and the state is garbage.
void adamw_step(Context& ctx, float* weight, const void* grad, Storage grad_type, float* exp_avg,
                float* exp_avg_sq, std::size_t n, long step, const AdamWConfig& config,
                unsigned long long* bad);

/// grad *= 1 / num_contributors (fp32). num_contributors >= 1.
void average_gradient(Context& ctx, float* grad, std::size_t n, int num_contributors);

// ---- global-norm clipping (--clip-norm; src/dmuon/engine/step/grad_clip.hpp) --------------------

/// Device accumulators of one rank's part of the norm: the sum of squares in fp64 (as the host
/// sums) and the max |g| as the bits of a non-negative fp32 (an integer max orders them, and
/// NaN's bits exceed +inf's, so NaN propagates as on the host).
struct ClipPartial {
  double sum_sq;
  unsigned int max_bits;
};
/// Zeroes *acc (async).
void clip_partial_reset(Context& ctx, ClipPartial* acc);
/// Adds n gradient values of `type` to *acc: their squares (inf_norm false) or their |g| max.
void clip_partial_add(Context& ctx, const void* g, Storage type, std::size_t n, bool inf_norm,
                      ClipPartial* acc);
/// *scalar = float(acc->sum_sq) or the max: the one fp32 the world all-reduces (sum or max).
void clip_partial_finish(Context& ctx, const ClipPartial* acc, bool inf_norm, float* scalar);
/// g *= coef in fp32, rounded back to `type`, with coef computed on the device from the world's
/// reduced scalar as clip_grad_norm_ does: total = sqrt(*reduced) (or *reduced for inf),
/// coef = min(1, float(max_norm) / (float(total) + 1e-6f)). No host round trip.
void clip_scale(Context& ctx, void* g, Storage type, std::size_t n, const float* reduced,
                bool inf_norm, double max_norm);

// ---- Newton–Schulz ------------------------------------------------------------------------------

/// Device scratch for one shape and storage type, allocated once (reuse in the hot loop; one
/// call in flight per workspace): two rows×cols and six m×m matrices (m = min(rows, cols)),
/// each in the widest type the numerics it may run give it, plus small tables. Setup only: the
/// constructor allocates and synchronises.
class NsWorkspace {
 public:
  NsWorkspace(std::size_t rows, std::size_t cols, Storage storage);
  ~NsWorkspace();
  NsWorkspace(const NsWorkspace&) = delete;
  NsWorkspace& operator=(const NsWorkspace&) = delete;
  std::size_t rows() const;
  std::size_t cols() const;
  Storage storage() const;
  /// Device bytes held (muon_step's scratch included once allocated).
  std::size_t bytes() const;
  /// Tiling of the Gram form's symmetric products: b×b blocks, the b(b+1)/2 upper ones
  /// computed by one batched GEMM (b = 1: plain GEMMs). Default from m (4 for m = 4096); valid:
  /// 1, or 2/4/8 when m is a multiple of 8·b. A benchmark knob: switching is free (no sync).
  int symmetric_blocks() const;
  void set_symmetric_blocks(int blocks);
  /// The direct form's X̃X̃ᵀ and Ã² on the upper block triangle of that tiling, mirrored
  /// (ns_plan.hpp run_direct): (b+1)/(2b) of their work. Off by default: a benchmark knob until
  /// a GPU run shows it faster. Turning it on builds the tile tables for the numerics in force
  /// (setup only: synchronises); a Gram call with other buffer types then needs it off again.
  bool direct_symmetric() const;
  void set_direct_symmetric(bool on);
  /// What a call asking for `requested` runs: ns_numerics(rows, cols, storage, requested)
  /// (ns_numerics.hpp), or the numerics set_numerics() forces.
  NsNumerics numerics(NsVariant requested) const;
  /// Runs every later call with `forced` whatever form it asks for (checks and benchmarks:
  /// e.g. the Gram form with fp32 matrices on a shape the rule gives the direct form, or the
  /// fp16 Gram matrices the rule avoids). x must be fp32 for fp32 storage; a wider type than
  /// the buffers hold reallocates them (setup only: may synchronise).
  void set_numerics(const NsNumerics& forced);
  /// Back to the rule.
  void clear_numerics();
  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

/// out = NS(g) (SPEC §7); g and out are rows×cols device matrices in `storage` (may alias; the
/// workspace's type). config.variant is the requested form; what runs is
/// workspace.numerics(config.variant) (ns_numerics.hpp: the direct form in the storage type,
/// the reference arithmetic; the Gram form with fp32 m×m matrices where it pays), symmetric
/// products on the upper block triangle. ‖g‖_F is accumulated in double. A tall matrix iterates on
/// its wide transpose through the GEMM flags. A non-finite input (its sum of squares is not finite)
/// adds 1 to *bad; the output is then garbage.
void newton_schulz(Context& ctx, const void* g, void* out, std::size_t rows, std::size_t cols,
                   Storage storage, const NsConfig& config, NsWorkspace& workspace,
                   unsigned long long* bad);

/// One Muon step (tests, benchmarks): muon_momentum (fp32 grad) → newton_schulz in the
/// workspace's storage → muon_apply with scale muon_scale(rows, cols). Each piece adds its count
/// to *bad (non-zero = the step failed). The first call on a workspace allocates a rows×cols
/// scratch (cudaMalloc: may synchronise the device).
void muon_step(Context& ctx, float* weight, const float* grad, float* momentum_buf,
               std::size_t rows, std::size_t cols, long step, const MuonConfig& config,
               NsWorkspace& workspace, unsigned long long* bad);

// ---- GEMM ---------------------------------------------------------------------------------------

/// c = alpha·op(a)·op(b) + beta·c, row-major (a is m×k, or k×m when trans_a; b is k×n, or n×k
/// when trans_b; c is m×n), densely stored in `storage`, fp32 accumulation, no TF32. The
/// engine's Linear: Y = X·Wᵀ (false, true), dX = dY·W (false, false), dW = dYᵀ·X (true, false).
void gemm(Context& ctx, Storage storage, bool trans_a, bool trans_b, std::size_t m, std::size_t n,
          std::size_t k, float alpha, const void* a, const void* b, float beta, void* c);
/// The same with c in its own type: a and b in `storage`, c in `c_storage` (cuBLAS: fp32 c
/// with any a/b type; 16-bit c only with the same 16-bit a/b). The engine's dW when gradients
/// travel in another type than the weights (--reduce-dtype fp32 on bf16 weights).
void gemm(Context& ctx, Storage storage, Storage c_storage, bool trans_a, bool trans_b,
          std::size_t m, std::size_t n, std::size_t k, float alpha, const void* a, const void* b,
          float beta, void* c);

// ---- memory and timing helpers (tests, benchmarks; the copies wait for the device) ----------

void* device_alloc(std::size_t bytes);
void device_free(void* ptr) noexcept;
void copy_to_device(void* dst, const void* src, std::size_t bytes);
void copy_to_host(void* dst, const void* src, std::size_t bytes);

/// CUDA events on the context's stream: start(); ...; stop_ms() waits for the stop event and
/// returns the elapsed milliseconds.
class EventTimer {
 public:
  explicit EventTimer(Context& ctx);
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  void start();
  float stop_ms();

 private:
  void* stream_;
  void* start_ = nullptr;
  void* stop_ = nullptr;
};

}  // namespace dmuon::kernels::cuda
