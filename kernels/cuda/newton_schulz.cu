// CUDA Newton–Schulz (direct and Gram forms) and the Muon convenience step. The op sequence,
// the range scales and the tiling of the symmetric products live in ns_plan.hpp (shared with
// a CPU test); this file is its executor: cuBLAS GEMMs (fp32 accumulation) and three small
// kernels, all enqueued on the context's stream without any synchronisation.
//
// Iteration types. Direct form: the storage type throughout (bf16 like the reference Muon).
// Gram form: NsWorkspace::gram_dtype(), by default fp16 for 16-bit storage (bf16 or f16) and
// fp32 for fp32 storage. R, P, Q are m×m tensor-core GEMM operands either way, and the
// reference iterates its Gram matrices in fp16: fp16 is the right 16-bit type for them. The CPU
// emulation of this exact op sequence with the same rounding points (dmuon_ns_emulate --gaussian,
// 5 steps, wide/tall shapes 33×70..384×256) gives relative errors vs fp64 of 1.5e-2..1.7e-1 with
// bf16 R, P, Q (4.5e-1 on a square 96×96) against 2.5e-3..1.8e-2 with fp16 (6.9e-2 square); the
// bf16 direct form gives 1.0e-2..1.8e-2. fp16's range is no issue thanks to ns_plan.hpp's
// power-of-two scales. When the types differ, the normalisation writes X̃ in the Gram type and
// one conversion pass turns the result into the storage type. Symmetric products are mirrored
// from their upper triangles, so R, P, Q stay exactly symmetric.
#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cuda/detail.cuh"

namespace dmuon::kernels::cuda {

using detail::from_f;
using detail::grid_for;
using detail::kBlock;
using detail::to_f;

namespace {

// Block counts of the symmetric products; index 0 (b = 1) needs no pointer table.
constexpr int kBlockChoices[] = {1, 2, 4, 8};
constexpr int kNumChoices = 4;
constexpr std::size_t kMaxTiles = 36;  // 8·9/2
constexpr int kRoles = 3;              // A, B, C pointer arrays per buffer
// Blocks of the sum-of-squares reduction: enough to fill an H100/H200 (132 SMs × 8 blocks of
// 256 threads), few enough that the last block sums the partials quickly. Fixed per n, so the
// sum (hence the output) is the same on every run.
constexpr unsigned kSumsqBlocks = 1024;

int choice_index(int blocks) {
  for (int i = 0; i < kNumChoices; ++i) {
    if (kBlockChoices[i] == blocks) return i;
  }
  return -1;
}

}  // namespace

struct NsWorkspace::Impl {
  std::size_t rows = 0, cols = 0;
  Storage storage = Storage::f32;
  Storage gram = Storage::f32;  // iteration type of the Gram form
  plan::Shape shape{};
  plan::Scales scales{};
  void* buf[plan::kNumBuffers] = {};
  void* muon = nullptr;          // muon_step's rows×cols scratch (lazy)
  double* partials = nullptr;    // kSumsqBlocks partial sums, then the total
  unsigned int* done = nullptr;  // blocks finished (the last one resets it to 0)
  void** tables = nullptr;       // [choice][buffer][role][kMaxTiles] device pointers
  plan::RowMajorGemm sym_gemm[kNumChoices][2] = {};  // [choice][outer, product]
  int tiles[kNumChoices] = {};
  int blocks_index = 0;
  std::size_t bytes = 0;

  double* total() const { return partials + kSumsqBlocks; }
  void* const* table(int buffer, int role) const {
    return tables +
           ((static_cast<std::size_t>(blocks_index) * plan::kNumBuffers + buffer) * kRoles + role) *
               kMaxTiles;
  }
  void* alloc(std::size_t n) {
    void* p = device_alloc(n);
    bytes += n;
    return p;
  }
  ~Impl() {
    for (void* p : buf) device_free(p);
    device_free(muon);
    device_free(partials);
    device_free(done);
    device_free(tables);
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
  w.gram = storage == Storage::f32 ? Storage::f32 : Storage::f16;
  w.shape = plan::ns_shape(rows, cols);
  w.scales = plan::ns_scales(w.shape);
  const std::size_t m = w.shape.m, n = w.shape.n, es = storage_bytes(storage);
  if ((m + 31) / 32 > 65535) {
    throw KernelError("cuda::NsWorkspace: " + std::to_string(rows) + "x" + std::to_string(cols) +
                      " has min(rows, cols) > 65535·32, beyond the symmetric kernels' grid");
  }
  detail::check_gemm_dims(plan::dense_gemm(false, false, m, n, m), "cuda::NsWorkspace");

  for (int b = 0; b < plan::kNumBuffers; ++b) {
    w.buf[b] = w.alloc((plan::is_x_buffer(b) ? m * n : m * m) * es);
  }
  w.partials = static_cast<double*>(w.alloc((kSumsqBlocks + 1) * sizeof(double)));
  w.done = static_cast<unsigned int*>(w.alloc(sizeof(unsigned int)));
  DMUON_CUDA_CHECK(cudaMemset(w.done, 0, sizeof(unsigned int)));

  // Pointer tables of every valid tiling, so switching tilings needs no upload.
  std::vector<void*> host(
      static_cast<std::size_t>(kNumChoices) * plan::kNumBuffers * kRoles * kMaxTiles, nullptr);
  for (int ci = 0; ci < kNumChoices; ++ci) {
    const int blocks = kBlockChoices[ci];
    if (!plan::sym_blocks_valid(m, blocks)) continue;
    const plan::SymPlan outer = plan::sym_plan(plan::SymKind::outer, w.shape, blocks);
    const plan::SymPlan product = plan::sym_plan(plan::SymKind::product, w.shape, blocks);
    w.sym_gemm[ci][0] = outer.gemm;
    w.sym_gemm[ci][1] = product.gemm;
    w.tiles[ci] = static_cast<int>(product.tiles.size());
    for (int b = 0; b < plan::kNumBuffers; ++b) {
      const plan::SymPlan& p = plan::is_x_buffer(b) ? outer : product;
      char* base = static_cast<char*>(w.buf[b]);
      for (std::size_t t = 0; t < p.tiles.size(); ++t) {
        auto at = [&](int role) -> void*& {
          return host[((static_cast<std::size_t>(ci) * plan::kNumBuffers + b) * kRoles + role) *
                          kMaxTiles +
                      t];
        };
        at(0) = base + p.tiles[t].a * es;
        at(1) = base + p.tiles[t].b * es;
        at(2) = plan::is_x_buffer(b) ? nullptr : base + p.tiles[t].c * es;
      }
    }
  }
  w.tables = static_cast<void**>(w.alloc(host.size() * sizeof(void*)));
  copy_to_device(w.tables, host.data(), host.size() * sizeof(void*));  // waits for the device
  w.blocks_index = choice_index(plan::default_sym_blocks(m));
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
std::size_t NsWorkspace::bytes() const {
  return impl_->bytes;
}
int NsWorkspace::symmetric_blocks() const {
  return kBlockChoices[impl_->blocks_index];
}
void NsWorkspace::set_symmetric_blocks(int blocks) {
  if (!plan::sym_blocks_valid(impl_->shape.m, blocks)) {
    throw KernelError("cuda::NsWorkspace::set_symmetric_blocks: " + std::to_string(blocks) +
                      " blocks is not valid for m = " + std::to_string(impl_->shape.m) +
                      " (allowed: 1, or 2/4/8 when m is a multiple of 8*blocks)");
  }
  impl_->blocks_index = choice_index(blocks);
}

Storage NsWorkspace::gram_dtype() const {
  return impl_->gram;
}
void NsWorkspace::set_gram_dtype(Storage type) {
  // The buffers hold storage_bytes(storage) per element: the Gram type must have the same size.
  if ((impl_->storage == Storage::f32) != (type == Storage::f32)) {
    throw KernelError("cuda::NsWorkspace::set_gram_dtype: " + std::string(to_string(type)) +
                      " iterations do not fit a " + std::string(to_string(impl_->storage)) +
                      " workspace (f32 storage iterates in f32; bf16/f16 storage in bf16 or f16)");
  }
  impl_->gram = type;
}

namespace {

__device__ __forceinline__ double block_sum(double v) {
  __shared__ double warp_sums[kBlock / 32];
  for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  v = lane < kBlock / 32 ? warp_sums[lane] : 0.0;
  if (warp == 0) {
    for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
  }
  return v;  // valid in thread 0
}

// Sum of squares in double (exact products of fp32 values, overflow-free: a non-finite sum means
// a non-finite input). Each block writes its partial; the last block to finish adds them in
// block order (deterministic), stores the total, resets `done` and counts a non-finite total.
template <class T>
__global__ void __launch_bounds__(kBlock)
    sumsq_kernel(const T* x, std::size_t n, double* partials, unsigned int* done, double* total,
                 unsigned long long* bad) {
  __shared__ bool is_last;
  double acc = 0.0;
  DMUON_GRID_STRIDE(i, n) {
    const double v = to_f(x[i]);
    acc += v * v;
  }
  acc = block_sum(acc);
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = acc;
    __threadfence();
    is_last = atomicAdd(done, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!is_last) return;  // block-uniform
  double s = 0.0;
  for (unsigned b = threadIdx.x; b < gridDim.x; b += blockDim.x) s += __ldcg(partials + b);
  s = block_sum(s);
  if (threadIdx.x == 0) {
    *total = s;
    *done = 0u;
    if (bad != nullptr && !isfinite(s)) atomicAdd(bad, 1ull);
  }
}

// out = g · scale / (‖g‖_F + eps): the norm in fp32 from the double sum, as the host does.
template <class Tin, class Tout>
__global__ void __launch_bounds__(kBlock)
    normalise_kernel(const Tin* in, Tout* out, std::size_t n, const double* total, float eps,
                     float scale) {
  const float inv = (1.0f / (static_cast<float>(sqrt(*total)) + eps)) * scale;
  DMUON_GRID_STRIDE(i, n) {
    out[i] = from_f<Tout>(to_f(in[i]) * inv);
  }
}

// B += b·A + a·I, row-major m×m (full matrices; the diagonal is where idx % (m + 1) == 0).
template <class T>
__global__ void __launch_bounds__(kBlock)
    poly_add_kernel(const T* A, T* B, std::size_t m, float a, float b) {
  DMUON_GRID_STRIDE(idx, m * m) {
    float v = to_f(B[idx]) + b * to_f(A[idx]);
    if (idx % (m + 1) == 0) v += a;
    B[idx] = from_f<T>(v);
  }
}

// out = a·I + b·r + c·r2 (r2 may be null) on the full m×m matrix, reading only the upper
// triangles (i <= j) of r and r2 and writing both triangles of out (out may be r: the mirror).
// Grid (nt, nt) of 32×32 tiles, nt = ceil(m/32); blocks below the diagonal exit at once; a block
// above it loads its upper tile into shared memory and writes it and its transpose (coalesced
// both ways); a diagonal block rebuilds its lower half from its upper half.
constexpr unsigned kTile = 32, kTileRows = 8;

template <class T>
__global__ void __launch_bounds__(kTile* kTileRows)
    sym_combine_kernel(const T* r, const T* r2, T* out, std::size_t m, float a, float b, float c) {
  const std::size_t tile_row = blockIdx.y, tile_col = blockIdx.x;
  if (tile_row > tile_col) return;  // block-uniform
  __shared__ float tile[kTile][kTile + 1];
  const unsigned tx = threadIdx.x, ty = threadIdx.y;
  const std::size_t row0 = tile_row * kTile, col0 = tile_col * kTile;
  for (unsigned k = ty; k < kTile; k += kTileRows) {
    const std::size_t i = row0 + k, j = col0 + tx;
    if (i < m && j < m) {
      const std::size_t idx = i * m + j;
      float v = b * to_f(r[idx]);
      if (r2 != nullptr) v += c * to_f(r2[idx]);
      if (i == j) v += a;
      tile[k][tx] = v;
    }
  }
  __syncthreads();
  for (unsigned k = ty; k < kTile; k += kTileRows) {
    const std::size_t i = row0 + k, j = col0 + tx;
    if (tile_row == tile_col) {
      // (k, tx) is upper when k <= tx; else take its upper twin (tx, k), loaded because
      // row0 + tx = j < m and col0 + k = i < m.
      if (i < m && j < m) out[i * m + j] = from_f<T>(k <= tx ? tile[k][tx] : tile[tx][k]);
    } else {
      if (i < m && j < m) out[i * m + j] = from_f<T>(tile[k][tx]);
      // Lower tile: out(col0 + k, row0 + tx) = upper (row0 + tx, col0 + k) = tile[tx][k].
      const std::size_t li = col0 + k, lj = row0 + tx;
      if (li < m && lj < m) out[li * m + lj] = from_f<T>(tile[tx][k]);
    }
  }
}

// The executor of plan::run_direct / plan::run_gram on the GPU; T is the iteration type.
template <class T>
struct GpuExec {
  Context& ctx;
  cudaStream_t stream;
  cublasHandle_t cublas;
  cudaDataType_t type;
  const NsWorkspace::Impl& w;
  void* out;  // the caller's output (of type T unless copy_out converts)

  void* ptr(int b) const { return b == plan::kOut ? out : w.buf[b]; }

  void gemm(const plan::RowMajorGemm& g, float alpha, int a, int b, int c) {
    detail::gemm_rm(cublas, type, type, g, alpha, ptr(a), ptr(b), 0.0f, ptr(c));
  }

  void sym(plan::SymKind kind, float alpha, int a, int b, int c) {
    const plan::RowMajorGemm& g = w.sym_gemm[w.blocks_index][kind == plan::SymKind::outer ? 0 : 1];
    if (w.blocks_index == 0) {
      gemm(g, alpha, a, b, c);
      return;
    }
    detail::gemm_batched_rm(cublas, type, g, alpha, w.table(a, 0), w.table(b, 1), 0.0f,
                            w.table(c, 2), w.tiles[w.blocks_index]);
  }

  void combine(int r, int r2, int dst, float a, float b, float c) {
    const std::size_t m = w.shape.m;
    const unsigned nt = static_cast<unsigned>((m + kTile - 1) / kTile);
    sym_combine_kernel<T><<<dim3(nt, nt), dim3(kTile, kTileRows), 0, stream>>>(
        static_cast<const T*>(ptr(r)), r2 < 0 ? nullptr : static_cast<const T*>(ptr(r2)),
        static_cast<T*>(ptr(dst)), m, a, b, c);
    DMUON_CUDA_CHECK_LAUNCH();
  }
  void mirror(int c) { combine(c, -1, c, 0.0f, 1.0f, 0.0f); }
  void sym_poly(int r, int r2, int p, float a, float b, float c) { combine(r, r2, p, a, b, c); }

  void copy_out(int x_buf) {
    convert(ctx, w.buf[x_buf], detail::dtype_of<T>(), out, w.storage, w.rows * w.cols);
  }

  void poly_add(int a_buf, int b_buf, float a, float b) {
    const std::size_t m = w.shape.m;
    poly_add_kernel<T><<<grid_for(m * m), kBlock, 0, stream>>>(
        static_cast<const T*>(ptr(a_buf)), static_cast<T*>(ptr(b_buf)), m, a, b);
    DMUON_CUDA_CHECK_LAUNCH();
  }
};

// Ts: the storage type of g and out; Ti: the iteration type (see the header comment).
template <class Ts, class Ti>
void ns_impl(Context& ctx, const Ts* g, Ts* out, const NsConfig& cfg, NsWorkspace::Impl& w,
             unsigned long long* bad) {
  cudaStream_t st = detail::stream_of(ctx);
  const std::size_t count = w.rows * w.cols;
  const unsigned sumsq_blocks = std::min(grid_for(count), kSumsqBlocks);
  sumsq_kernel<Ts><<<sumsq_blocks, kBlock, 0, st>>>(g, count, w.partials, w.done, w.total(), bad);
  DMUON_CUDA_CHECK_LAUNCH();
  normalise_kernel<Ts, Ti><<<grid_for(count), kBlock, 0, st>>>(g, static_cast<Ti*>(w.buf[plan::kX]),
                                                               count, w.total(), cfg.eps,
                                                               static_cast<float>(w.scales.x));
  DMUON_CUDA_CHECK_LAUNCH();
  GpuExec<Ti> e{ctx, st, ctx.impl().cublas, detail::data_type(detail::dtype_of<Ti>()), w, out};
  if (cfg.variant == NsVariant::direct) {
    plan::run_direct(e, w.shape, cfg, w.scales);
  } else {
    plan::run_gram(e, w.shape, cfg, w.scales, !std::is_same_v<Ts, Ti>);
  }
}

void check_shape(const char* call, std::size_t rows, std::size_t cols, const NsWorkspace& ws) {
  if (rows == 0 || cols == 0 || rows != ws.rows() || cols != ws.cols()) {
    throw KernelError(std::string(call) + ": matrix is " + std::to_string(rows) + "x" +
                      std::to_string(cols) + " but the workspace is " + std::to_string(ws.rows()) +
                      "x" + std::to_string(ws.cols()));
  }
}

}  // namespace

void newton_schulz(Context& ctx, const void* g, void* out, std::size_t rows, std::size_t cols,
                   Storage storage, const NsConfig& config, NsWorkspace& workspace,
                   unsigned long long* bad) {
  check_shape("cuda::newton_schulz", rows, cols, workspace);
  if (storage != workspace.storage()) {
    throw KernelError("cuda::newton_schulz: matrix storage is " + std::string(to_string(storage)) +
                      " but the workspace is " + std::string(to_string(workspace.storage())));
  }
  if (config.steps < 1) {
    throw KernelError("cuda::newton_schulz: steps must be >= 1, got " +
                      std::to_string(config.steps));
  }
  detail::require_ptr(g, rows * cols, "cuda::newton_schulz", "g");
  detail::require_ptr(out, rows * cols, "cuda::newton_schulz", "out");
  detail::dispatch(storage, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto* gs = static_cast<const T*>(g);
    auto* os = static_cast<T*>(out);
    auto& w = workspace.impl();
    if constexpr (std::is_same_v<T, float>) {
      ns_impl<T, T>(ctx, gs, os, config, w, bad);
    } else if (config.variant == NsVariant::direct) {
      ns_impl<T, T>(ctx, gs, os, config, w, bad);
    } else if (w.gram == Storage::f16) {
      ns_impl<T, __half>(ctx, gs, os, config, w, bad);
    } else {
      ns_impl<T, __nv_bfloat16>(ctx, gs, os, config, w, bad);
    }
  });
}

void muon_step(Context& ctx, float* weight, const float* grad, float* momentum_buf,
               std::size_t rows, std::size_t cols, long step, const MuonConfig& config,
               NsWorkspace& workspace, unsigned long long* bad) {
  check_shape("cuda::muon_step", rows, cols, workspace);
  if (step < 1) {
    throw KernelError("cuda::muon_step: step must be >= 1, got " + std::to_string(step));
  }
  const std::size_t n = rows * cols;
  detail::require_ptr(weight, n, "cuda::muon_step", "weight");
  detail::require_ptr(grad, n, "cuda::muon_step", "grad");
  detail::require_ptr(momentum_buf, n, "cuda::muon_step", "momentum_buf");
  auto& w = workspace.impl();
  if (w.muon == nullptr) w.muon = w.alloc(n * storage_bytes(w.storage));
  muon_momentum(ctx, grad, Storage::f32, momentum_buf, w.muon, w.storage, n, step, config.momentum,
                config.nesterov, bad);
  newton_schulz(ctx, w.muon, w.muon, rows, cols, w.storage, config.ns, workspace, bad);
  muon_apply(ctx, weight, w.muon, w.storage, n, config.lr, config.weight_decay,
             muon_scale(rows, cols), bad);
}

}  // namespace dmuon::kernels::cuda
