// CUDA Newton–Schulz (direct and Gram forms) and the Muon convenience step. The op sequence,
// the range scales and the tiling of the symmetric products live in ns_plan.hpp (shared with
// a CPU test and the CPU emulation); this file is its executor: cuBLAS GEMMs (fp32
// accumulation) and three small kernels, all enqueued on the context's stream without any
// synchronisation.
//
// Numerics (ns_numerics.hpp, docs/KERNELS.md): each call runs the form and types the rule gives
// its shape and storage (or NsWorkspace::set_numerics forces): the direct form in the storage
// type, or the Gram form with X̃ in one type and the m×m matrices in another (fp16 X̃ and fp32
// R̃, P, Q for 16-bit storage: 16-bit Gram matrices lose the small singular values). A GEMM
// reads two operands of one type and may write a wider one (X̃X̃ᵀ in fp16 into fp32 R̃); Q
// reaches Q·X̃ through a narrowing copy (kQn). When the X type differs from the storage type,
// the normalisation writes X̃ in the X type and one conversion pass turns the result into the
// storage type. Symmetric products are mirrored from their upper triangles, so R, P, Q stay
// exactly symmetric.
#include <algorithm>
#include <string>
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
  bool forced = false;
  NsNumerics force{};
  plan::Shape shape{};
  plan::Scales scales{};
  void* buf[plan::kNumBuffers] = {};
  std::size_t capacity[plan::kNumBuffers] = {};  // bytes of each buffer
  NsNumerics tabled{};                           // the numerics `tables` point for
  bool direct_symmetric = false;                 // run_direct on symmetric tiles
  void* muon = nullptr;                          // muon_step's rows×cols scratch (lazy)
  double* partials = nullptr;                    // kSumsqBlocks partial sums, then the total
  unsigned int* done = nullptr;                  // blocks finished (the last one resets it to 0)
  void** tables = nullptr;  // [choice][buffer][role][kMaxTiles] device pointers
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
  NsNumerics numerics(NsVariant requested) const {
    return forced ? force : ns_numerics(rows, cols, storage, requested);
  }
  void* alloc(std::size_t n) {
    void* p = device_alloc(n);
    bytes += n;
    return p;
  }
  std::size_t elements(int b) const {
    return plan::is_x_buffer(b) ? shape.m * shape.n : shape.m * shape.m;
  }
  // Grows the buffers to hold `num`'s types (a grown buffer is reallocated: setup only).
  void fit(const NsNumerics& num) {
    for (int b = 0; b < plan::kNumBuffers; ++b) {
      const std::size_t need = elements(b) * storage_bytes(plan::buffer_type(num, b));
      if (need <= capacity[b]) continue;
      device_free(buf[b]);
      bytes -= capacity[b];
      buf[b] = alloc(need);
      capacity[b] = need;
    }
    if (num.form == NsVariant::gram) build_tables(num);
  }
  void build_tables(const NsNumerics& num);
  ~Impl() {
    for (void* p : buf) device_free(p);
    device_free(muon);
    device_free(partials);
    device_free(done);
    device_free(tables);
  }
};

// Pointer tables of every valid tiling for the Gram numerics `num` (tile offsets scale with
// each buffer's element type), so switching tilings needs no upload. Uploading waits for the
// device: setup only.
void NsWorkspace::Impl::build_tables(const NsNumerics& num) {
  const std::size_t m = shape.m;
  std::vector<void*> host(
      static_cast<std::size_t>(kNumChoices) * plan::kNumBuffers * kRoles * kMaxTiles, nullptr);
  for (int ci = 0; ci < kNumChoices; ++ci) {
    const int blocks = kBlockChoices[ci];
    if (!plan::sym_blocks_valid(m, blocks)) continue;
    const plan::SymPlan outer = plan::sym_plan(plan::SymKind::outer, shape, blocks);
    const plan::SymPlan product = plan::sym_plan(plan::SymKind::product, shape, blocks);
    sym_gemm[ci][0] = outer.gemm;
    sym_gemm[ci][1] = product.gemm;
    tiles[ci] = static_cast<int>(product.tiles.size());
    for (int b = 0; b < plan::kNumBuffers; ++b) {
      const plan::SymPlan& p = plan::is_x_buffer(b) ? outer : product;
      const std::size_t es = storage_bytes(plan::buffer_type(num, b));
      char* base = static_cast<char*>(buf[b]);
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
  if (tables == nullptr) tables = static_cast<void**>(alloc(host.size() * sizeof(void*)));
  copy_to_device(tables, host.data(), host.size() * sizeof(void*));  // waits for the device
  tabled = num;
}

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
  w.shape = plan::ns_shape(rows, cols);
  w.scales = plan::ns_scales(w.shape);
  const std::size_t m = w.shape.m;
  if ((m + 31) / 32 > 65535) {
    throw KernelError("cuda::NsWorkspace: " + std::to_string(rows) + "x" + std::to_string(cols) +
                      " has min(rows, cols) > 65535·32, beyond the symmetric kernels' grid");
  }
  detail::check_gemm_dims(plan::dense_gemm(false, false, m, w.shape.n, m), "cuda::NsWorkspace");
  w.partials = static_cast<double*>(w.alloc((kSumsqBlocks + 1) * sizeof(double)));
  w.done = static_cast<unsigned int*>(w.alloc(sizeof(unsigned int)));
  DMUON_CUDA_CHECK(cudaMemset(w.done, 0, sizeof(unsigned int)));
  w.blocks_index = choice_index(plan::default_sym_blocks(m));
  // What the rule gives either requested form.
  w.fit(w.numerics(NsVariant::direct));
  w.fit(w.numerics(NsVariant::gram));
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
bool NsWorkspace::direct_symmetric() const {
  return impl_->direct_symmetric;
}
void NsWorkspace::set_direct_symmetric(bool on) {
  impl_->direct_symmetric = on;
  const NsNumerics direct = impl_->numerics(NsVariant::direct);
  if (on && (impl_->tables == nullptr || !plan::same_buffer_types(impl_->tabled, direct)))
    impl_->build_tables(direct);
}

NsNumerics NsWorkspace::numerics(NsVariant requested) const {
  return impl_->numerics(requested);
}
void NsWorkspace::set_numerics(const NsNumerics& forced) {
  if ((impl_->storage == Storage::f32) && forced.x != Storage::f32) {
    throw KernelError("cuda::NsWorkspace::set_numerics: x = " + std::string(to_string(forced.x)) +
                      " on f32 storage (f32 storage iterates X in f32)");
  }
  impl_->fit(forced);
  impl_->forced = true;
  impl_->force = forced;
}
void NsWorkspace::clear_numerics() {
  impl_->forced = false;
  const NsNumerics rule = impl_->numerics(NsVariant::gram);
  if (rule.form == NsVariant::gram) impl_->fit(rule);
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

// The executor of plan::run (ns_plan.hpp) on the GPU for numerics `num`: every buffer in its
// plan::buffer_type, the caller's output (kOut) in the storage type.
struct GpuExec {
  Context& ctx;
  cudaStream_t stream;
  cublasHandle_t cublas;
  const NsWorkspace::Impl& w;
  NsNumerics num;
  void* out;

  void* ptr(int b) const { return b == plan::kOut ? out : w.buf[b]; }
  Storage type_of(int b) const { return b == plan::kOut ? w.storage : plan::buffer_type(num, b); }
  cudaDataType_t data_type_of(int b) const { return detail::data_type(type_of(b)); }

  void gemm(const plan::RowMajorGemm& g, float alpha, int a, int b, int c) {
    detail::gemm_rm(cublas, data_type_of(a), data_type_of(c), g, alpha, ptr(a), ptr(b), 0.0f,
                    ptr(c));
  }

  void sym(plan::SymKind kind, float alpha, int a, int b, int c) {
    const plan::RowMajorGemm& g = w.sym_gemm[w.blocks_index][kind == plan::SymKind::outer ? 0 : 1];
    if (w.blocks_index == 0) {
      gemm(g, alpha, a, b, c);
      return;
    }
    if (w.tables == nullptr || !plan::same_buffer_types(w.tabled, num))
      throw KernelError("cuda::newton_schulz: tile tables of other buffer types");
    detail::gemm_batched_rm(cublas, data_type_of(a), data_type_of(c), g, alpha, w.table(a, 0),
                            w.table(b, 1), 0.0f, w.table(c, 2), w.tiles[w.blocks_index]);
  }

  // The m×m kernels run on the m×m matrices' type.
  void combine(int r, int r2, int dst, float a, float b, float c) {
    const std::size_t m = w.shape.m;
    const unsigned nt = static_cast<unsigned>((m + kTile - 1) / kTile);
    detail::dispatch(num.gram, [&](auto tag) {
      using T = typename decltype(tag)::type;
      sym_combine_kernel<T><<<dim3(nt, nt), dim3(kTile, kTileRows), 0, stream>>>(
          static_cast<const T*>(ptr(r)), r2 < 0 ? nullptr : static_cast<const T*>(ptr(r2)),
          static_cast<T*>(ptr(dst)), m, a, b, c);
    });
    DMUON_CUDA_CHECK_LAUNCH();
  }
  void mirror(int c) { combine(c, -1, c, 0.0f, 1.0f, 0.0f); }
  void sym_poly(int r, int r2, int p, float a, float b, float c) { combine(r, r2, p, a, b, c); }

  void poly_add(int a_buf, int b_buf, float a, float b) {
    const std::size_t m = w.shape.m;
    detail::dispatch(num.gram, [&](auto tag) {
      using T = typename decltype(tag)::type;
      poly_add_kernel<T><<<grid_for(m * m), kBlock, 0, stream>>>(
          static_cast<const T*>(ptr(a_buf)), static_cast<T*>(ptr(b_buf)), m, a, b);
    });
    DMUON_CUDA_CHECK_LAUNCH();
  }

  void narrow(int m_buf, int dst) {
    convert(ctx, ptr(m_buf), type_of(m_buf), ptr(dst), type_of(dst), w.shape.m * w.shape.m);
  }
  void copy_out(int x_buf) {
    convert(ctx, ptr(x_buf), type_of(x_buf), out, w.storage, w.rows * w.cols);
  }
};

// Ts: the storage type of g and out; the normalisation writes X̃ in num.x.
template <class Ts>
void ns_impl(Context& ctx, const Ts* g, Ts* out, const NsConfig& cfg, const NsNumerics& num,
             NsWorkspace::Impl& w, unsigned long long* bad) {
  cudaStream_t st = detail::stream_of(ctx);
  const std::size_t count = w.rows * w.cols;
  const unsigned sumsq_blocks = std::min(grid_for(count), kSumsqBlocks);
  sumsq_kernel<Ts><<<sumsq_blocks, kBlock, 0, st>>>(g, count, w.partials, w.done, w.total(), bad);
  DMUON_CUDA_CHECK_LAUNCH();
  detail::dispatch(num.x, [&](auto tag) {
    using Tx = typename decltype(tag)::type;
    normalise_kernel<Ts, Tx>
        <<<grid_for(count), kBlock, 0, st>>>(g, static_cast<Tx*>(w.buf[plan::kX]), count, w.total(),
                                             cfg.eps, static_cast<float>(w.scales.x));
  });
  DMUON_CUDA_CHECK_LAUNCH();
  GpuExec e{ctx, st, ctx.impl().cublas, w, num, out};
  plan::run(e, w.shape, cfg, w.scales, num, w.storage, w.direct_symmetric);
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
  auto& w = workspace.impl();
  const NsNumerics num = w.numerics(config.variant);
  detail::dispatch(storage, [&](auto tag) {
    using T = typename decltype(tag)::type;
    ns_impl<T>(ctx, static_cast<const T*>(g), static_cast<T*>(out), config, num, w, bad);
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
