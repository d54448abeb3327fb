// CUDA kernels. Three layers:
//  * always (CPU): the CUDA Newton–Schulz plan (kernels/cuda/ns_plan.hpp: the op sequence the
//    GPU executes, its tiling and its row-/column-major mapping) run by an fp32 CPU executor
//    that evaluates every GEMM through the column-major call cuBLAS receives; it must match the
//    host kernels. This checks the GPU path's algebra without a GPU;
//  * without CUDA compiled in: every entry point throws a clear KernelError;
//  * with a GPU: randomized comparisons against the host kernels (skipped otherwise).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/adamw.hpp"
#include "kernels/cuda/kernels.hpp"
#include "kernels/cuda/ns_plan.hpp"
#include "kernels/kernel_error.hpp"
#include "kernels/muon.hpp"
#include "kernels/newton_schulz.hpp"
#include "kokkos_environment.hpp"
#include "test_util.hpp"

namespace dmuon::kernels {
namespace {

namespace plan = cuda::plan;

// ---- the plan on the CPU --------------------------------------------------------------------

/// Column-major C (m×n, ldc) = alpha·op(first)·op(second), the semantics of cublasGemmEx.
void column_major_gemm(const plan::ColumnMajorGemm& cm, float alpha, const float* first,
                       const float* second, float* c) {
  for (std::size_t r = 0; r < cm.m; ++r) {
    for (std::size_t col = 0; col < cm.n; ++col) {
      double acc = 0.0;
      for (std::size_t p = 0; p < cm.k; ++p) {
        const float f = cm.trans_first ? first[p + r * cm.ld_first] : first[r + p * cm.ld_first];
        const float s =
            cm.trans_second ? second[col + p * cm.ld_second] : second[p + col * cm.ld_second];
        acc += static_cast<double>(f) * s;
      }
      c[r + col * cm.ldc] = alpha * static_cast<float>(acc);
    }
  }
}

/// fp32 executor of plan::run_direct / plan::run_gram: GEMMs through to_column_major (operands
/// swapped as in detail::gemm_rm), symmetric products tile by tile as the batched GEMM does.
struct CpuExec {
  plan::Shape s;
  int blocks;
  std::vector<std::vector<float>> buf;
  float* out;

  float* ptr(int b) { return b == plan::kOut ? out : buf[static_cast<std::size_t>(b)].data(); }
  void gemm_at(const plan::RowMajorGemm& g, float alpha, int a, std::size_t ao, int b,
               std::size_t bo, int c, std::size_t co) {
    column_major_gemm(plan::to_column_major(g), alpha, ptr(b) + bo, ptr(a) + ao, ptr(c) + co);
  }
  void gemm(const plan::RowMajorGemm& g, float alpha, int a, int b, int c) {
    gemm_at(g, alpha, a, 0, b, 0, c, 0);
  }
  void sym(plan::SymKind kind, float alpha, int a, int b, int c) {
    const plan::SymPlan p = plan::sym_plan(kind, s, blocks);
    // Poison the strictly lower block triangle: the plan must never read it before mirror().
    float* cp = ptr(c);
    const std::size_t mb = s.m / static_cast<std::size_t>(blocks);
    for (std::size_t i = 0; i < s.m; ++i)
      for (std::size_t j = 0; j < s.m; ++j)
        if (i / mb > j / mb) cp[i * s.m + j] = std::numeric_limits<float>::quiet_NaN();
    for (const plan::Tile& t : p.tiles) gemm_at(p.gemm, alpha, a, t.a, b, t.b, c, t.c);
  }
  void combine(int r, int r2, int dst, float a, float b, float c) {
    const std::size_t m = s.m;
    std::vector<float> res(m * m);
    for (std::size_t i = 0; i < m; ++i) {
      for (std::size_t j = 0; j < m; ++j) {
        const std::size_t u = std::min(i, j) * m + std::max(i, j);  // upper triangle only
        float v = b * ptr(r)[u];
        if (r2 >= 0) v += c * ptr(r2)[u];
        if (i == j) v += a;
        res[i * m + j] = v;
      }
    }
    std::copy(res.begin(), res.end(), ptr(dst));
  }
  void mirror(int c) { combine(c, -1, c, 0.0f, 1.0f, 0.0f); }
  void sym_poly(int r, int r2, int p, float a, float b, float c) { combine(r, r2, p, a, b, c); }
  void poly_add(int a_buf, int b_buf, float a, float b) {
    const std::size_t m = s.m;
    for (std::size_t idx = 0; idx < m * m; ++idx) {
      ptr(b_buf)[idx] += b * ptr(a_buf)[idx] + (idx % (m + 1) == 0 ? a : 0.0f);
    }
  }
  void copy_out(int x) {
    const auto& src = buf[static_cast<std::size_t>(x)];
    std::copy(src.begin(), src.end(), out);
  }
};

std::vector<float> plan_newton_schulz(const std::vector<float>& g, std::size_t rows,
                                      std::size_t cols, const NsConfig& cfg, int blocks,
                                      bool symmetric_direct = false) {
  CpuExec e{plan::ns_shape(rows, cols), blocks, {}, nullptr};
  const plan::Scales sc = plan::ns_scales(e.s);
  for (int b = 0; b < plan::kNumBuffers; ++b) {
    e.buf.emplace_back(plan::is_x_buffer(b) ? e.s.m * e.s.n : e.s.m * e.s.m,
                       std::numeric_limits<float>::quiet_NaN());
  }
  std::vector<float> out(rows * cols, std::numeric_limits<float>::quiet_NaN());
  e.out = out.data();
  double ss = 0.0;
  for (float v : g) ss += static_cast<double>(v) * v;
  const float inv =
      (1.0f / (static_cast<float>(std::sqrt(ss)) + cfg.eps)) * static_cast<float>(sc.x);
  for (std::size_t i = 0; i < g.size(); ++i) e.buf[plan::kX][i] = g[i] * inv;
  if (cfg.variant == NsVariant::direct) {
    plan::run_direct(e, e.s, cfg, sc, {NsVariant::direct, Dtype::f32, Dtype::f32},
                     /*convert_output=*/false, symmetric_direct);
  } else {
    plan::run_gram(e, e.s, cfg, sc, /*convert_output=*/blocks == 2);  // exercise both endings
  }
  return out;
}

TEST(CudaPlan, ColumnMajorMappingMatchesRowMajorProduct) {
  // Strided (non-dense) operands: row strides larger than the used widths.
  const std::size_t m = 5, n = 7, k = 3, pad = 4;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const plan::RowMajorGemm g{ta, tb, m, n, k, (ta ? m : k) + pad, (tb ? k : n) + pad, n + pad};
      const auto a = testing::random_matrix(ta ? k : m, g.lda, 1);
      const auto b = testing::random_matrix(tb ? n : k, g.ldb, 2);
      std::vector<float> c(m * g.ldc, 0.0f);
      column_major_gemm(plan::to_column_major(g), 2.0f, b.data(), a.data(), c.data());
      for (std::size_t i = 0; i < m; ++i) {
        for (std::size_t j = 0; j < n; ++j) {
          double want = 0.0;
          for (std::size_t p = 0; p < k; ++p) {
            want += static_cast<double>(ta ? a[p * g.lda + i] : a[i * g.lda + p]) *
                    (tb ? b[j * g.ldb + p] : b[p * g.ldb + j]);
          }
          EXPECT_NEAR(c[i * g.ldc + j], 2.0 * want, 1e-5) << ta << tb << " " << i << "," << j;
        }
      }
    }
  }
}

TEST(CudaPlan, SymmetricTilesCoverTheUpperBlockTriangleOnce) {
  for (const auto& [rows, cols] : std::vector<std::pair<std::size_t, std::size_t>>{
           {256, 384}, {384, 256}, {4096, 14336}, {8192, 8192}, {160, 320}, {33, 70}}) {
    const plan::Shape s = plan::ns_shape(rows, cols);
    const int blocks = plan::default_sym_blocks(s.m);
    ASSERT_TRUE(plan::sym_blocks_valid(s.m, blocks)) << rows << "x" << cols;
    for (auto kind : {plan::SymKind::outer, plan::SymKind::product}) {
      const plan::SymPlan p = plan::sym_plan(kind, s, blocks);
      const std::size_t mb = s.m / static_cast<std::size_t>(blocks);
      EXPECT_EQ(p.tiles.size(), static_cast<std::size_t>(blocks * (blocks + 1) / 2));
      EXPECT_EQ(p.gemm.m, mb);
      EXPECT_EQ(p.gemm.n, mb);
      std::vector<int> hit(static_cast<std::size_t>(blocks * blocks), 0);
      for (const plan::Tile& t : p.tiles) {
        const std::size_t bi = t.c / (mb * s.m), bj = (t.c % s.m) / mb;
        ASSERT_LE(bi, bj);
        EXPECT_EQ(t.c, bi * mb * s.m + bj * mb);
        ++hit[bi * static_cast<std::size_t>(blocks) + bj];
        if (blocks > 1) {  // 16-byte aligned 16-bit tiles
          EXPECT_EQ(t.a % 8, 0u);
          EXPECT_EQ(t.b % 8, 0u);
        }
      }
      for (int i = 0; i < blocks; ++i)
        for (int j = 0; j < blocks; ++j) EXPECT_EQ(hit[i * blocks + j], i <= j ? 1 : 0);
    }
  }
  EXPECT_EQ(plan::default_sym_blocks(4096), 4);
  EXPECT_EQ(plan::default_sym_blocks(8192), 8);
  EXPECT_EQ(plan::default_sym_blocks(33), 1);
  EXPECT_FALSE(plan::sym_blocks_valid(100, 4));
  EXPECT_FALSE(plan::sym_blocks_valid(256, 3));
}

TEST(CudaPlan, ScalesArePowersOfTwoInRange) {
  for (const auto& [m, n] : std::vector<std::pair<std::size_t, std::size_t>>{
           {1, 1}, {1, 100000}, {33, 70}, {4096, 14336}, {65536, 65536}}) {
    const plan::Scales sc = plan::ns_scales({m, n, false});
    for (double v : {sc.x, sc.gram}) {
      int e = 0;
      EXPECT_EQ(std::frexp(v, &e), 0.5) << v;
      EXPECT_GE(v, 1.0);
      EXPECT_LE(v, 16384.0);
    }
  }
  EXPECT_EQ(plan::ns_scales({4096, 14336, false}).x, 8192.0);
  EXPECT_EQ(plan::ns_scales({4096, 14336, false}).gram, 4096.0);
}

TEST(CudaPlan, NewtonSchulzSequenceMatchesHost) {
  for (const auto& [rows, cols, blocks] :
       std::vector<std::tuple<std::size_t, std::size_t, int>>{{64, 192, 1},
                                                              {192, 64, 1},
                                                              {33, 70, 1},
                                                              {96, 160, 2},
                                                              {160, 96, 2},
                                                              {256, 320, 4},
                                                              {320, 256, 4},
                                                              {384, 448, 8}}) {
    const auto g = testing::random_matrix(rows, cols, 5);
    for (auto set : {NsCoefficientSet::classic_muon, NsCoefficientSet::polar_express}) {
      for (auto variant : {NsVariant::direct, NsVariant::gram}) {
        NsConfig cfg;
        cfg.coefficients = set;
        cfg.variant = variant;
        host::NsWorkspace hws(rows, cols);
        std::vector<float> ref(rows * cols);
        host::newton_schulz(g.data(), ref.data(), rows, cols, cfg, hws, "w");
        const auto got = plan_newton_schulz(g, rows, cols, cfg, blocks);
        // fp32 both ways, different summation orders: the Gram form amplifies rounding more.
        EXPECT_LT(testing::rel_diff(got, ref), variant == NsVariant::direct ? 1e-5 : 1e-4)
            << rows << "x" << cols << " blocks=" << blocks << " " << to_string(set) << " "
            << to_string(variant);
        if (variant != NsVariant::direct) continue;
        // The direct form on the upper block triangles (the executor poisons the lower one):
        // the same products, so the same bound.
        const auto sym = plan_newton_schulz(g, rows, cols, cfg, blocks, /*symmetric_direct=*/true);
        EXPECT_LT(testing::rel_diff(sym, ref), 1e-5)
            << rows << "x" << cols << " blocks=" << blocks << " " << to_string(set)
            << " direct on symmetric tiles";
      }
    }
  }
}

/// Counts the multiply-adds of the GEMMs a plan issues (2·m·n·k FLOPs each; a symmetric
/// product: one tile GEMM per tile of the upper block triangle).
struct FlopCounter {
  plan::Shape s;
  int blocks;
  double flops = 0;
  static double of(const plan::RowMajorGemm& g) { return 2.0 * g.m * g.n * g.k; }
  void gemm(const plan::RowMajorGemm& g, float, int, int, int) { flops += of(g); }
  void sym(plan::SymKind kind, float, int, int, int) {
    const plan::SymPlan p = plan::sym_plan(kind, s, blocks);
    flops += of(p.gemm) * static_cast<double>(p.tiles.size());
  }
  void mirror(int) {}
  void poly_add(int, int, float, float) {}
  void copy_out(int) {}
};

TEST(CudaPlan, DirectFormOnSymmetricTilesDoesTheTriangleShareOfItsProducts) {
  const std::size_t m = 256, n = 896;  // wide: X X^T costs 2m^2n, A^2 2m^3, B X 2m^2n
  NsConfig cfg;                        // 5 steps
  for (int blocks : {1, 2, 4, 8}) {
    FlopCounter full{plan::ns_shape(m, n), blocks}, sym{plan::ns_shape(m, n), blocks};
    const plan::Scales sc = plan::ns_scales(full.s);
    plan::run_direct(full, full.s, cfg, sc);
    plan::run_direct(sym, sym.s, cfg, sc, {NsVariant::direct, Dtype::f32, Dtype::f32}, false,
                     /*symmetric=*/true);
    const double mm = static_cast<double>(m), nn = static_cast<double>(n), b = blocks;
    const double symmetric_products = 2 * mm * mm * nn + 2 * mm * mm * mm;
    EXPECT_DOUBLE_EQ(full.flops, 5 * (symmetric_products + 2 * mm * mm * nn));
    EXPECT_DOUBLE_EQ(sym.flops, 5 * ((b + 1) / (2 * b) * symmetric_products + 2 * mm * mm * nn))
        << blocks << " blocks";
  }
}

// ---- CUDA not compiled: clear errors ----------------------------------------------------------

TEST(CudaKernels, StubThrowsClearErrorWhenNotCompiled) {
  if (cuda::compiled()) GTEST_SKIP() << "CUDA compiled in";
  auto expect_clear = [](const char* what, auto&& call) {
    try {
      call();
      ADD_FAILURE() << what << ": no exception";
    } catch (const KernelError& e) {
      EXPECT_NE(std::string(e.what()).find("DMUON_ENABLE_CUDA=ON"), std::string::npos) << what;
    }
  };
  expect_clear("Context", [] { cuda::Context ctx; });
  expect_clear("NsWorkspace", [] { cuda::NsWorkspace ws(4, 4, cuda::Storage::bf16); });
  expect_clear("alloc_counters", [] { cuda::alloc_counters(1); });
  expect_clear("DeviceCounters", [] { cuda::DeviceCounters c(2); });
  expect_clear("device_count", [] { cuda::device_count(); });
  expect_clear("device_alloc", [] { cuda::device_alloc(16); });
  cuda::free_counters(nullptr);  // no-ops, never throw
  cuda::device_free(nullptr);
}

// ---- on a GPU: against the host kernels ---------------------------------------------------------

bool have_gpu(std::string* why) {
  if (!cuda::compiled()) {
    *why = "CUDA kernels not compiled";
    return false;
  }
  try {
    if (cuda::device_count() > 0) return true;
    *why = "no GPU";
  } catch (const KernelError& e) {
    *why = e.what();
  }
  return false;
}

struct DeviceBuffer {
  explicit DeviceBuffer(std::size_t bytes) : ptr(cuda::device_alloc(bytes)) {}
  ~DeviceBuffer() { cuda::device_free(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  float* f() const { return static_cast<float*>(ptr); }
  void* ptr;
};

unsigned long long read(cuda::Context& ctx, const cuda::DeviceCounters& c) {
  unsigned long long v = 0;
  cuda::read_counters(ctx, c.data(), 1, &v);
  return v;
}

TEST(CudaKernels, NewtonSchulzMatchesHost) {
  std::string why;
  if (!have_gpu(&why)) GTEST_SKIP() << why;
  cuda::Context ctx;
  cuda::DeviceCounters bad(1);
  for (const auto& [m, n] :
       std::vector<std::pair<std::size_t, std::size_t>>{{64, 192}, {192, 64}, {256, 384}}) {
    for (NsVariant variant : {NsVariant::direct, NsVariant::gram}) {
      const auto g = testing::random_matrix(m, n, 3);
      NsConfig cfg;
      cfg.variant = variant;
      host::NsWorkspace hws(m, n);
      std::vector<float> ref(m * n), got(m * n);
      host::newton_schulz(g.data(), ref.data(), m, n, cfg, hws, "w");
      for (cuda::Storage st : {cuda::Storage::f32, cuda::Storage::bf16, cuda::Storage::f16}) {
        cuda::NsWorkspace dws(m, n, st);
        DeviceBuffer d32(m * n * 4), dst(m * n * 4);
        cuda::copy_to_device(d32.ptr, g.data(), m * n * 4);
        cuda::convert_from_f32(ctx, d32.f(), dst.ptr, m * n, st);
        cuda::newton_schulz(ctx, dst.ptr, dst.ptr, m, n, st, cfg, dws, bad.data());
        cuda::convert_to_f32(ctx, dst.ptr, d32.f(), m * n, st);
        ctx.synchronize();
        cuda::copy_to_host(got.data(), d32.ptr, m * n * 4);
        // fp32: summation order only; 16-bit: a few units of 2^-8 (bf16) / 2^-11 (fp16).
        const double tol =
            st == cuda::Storage::f32 ? 1e-4 : (st == cuda::Storage::bf16 ? 5e-2 : 2e-2);
        EXPECT_LT(testing::rel_diff(got, ref), tol)
            << m << "x" << n << " " << to_string(variant) << " " << cuda::to_string(st);
      }
    }
  }
  EXPECT_EQ(read(ctx, bad), 0u);
}

TEST(CudaKernels, MuonStepAndAdamWMatchHost) {
  std::string why;
  if (!have_gpu(&why)) GTEST_SKIP() << why;
  cuda::Context ctx;
  cuda::DeviceCounters bad(1);
  const std::size_t m = 48, n = 80, count = m * n;
  auto w = testing::random_matrix(m, n, 1);
  auto aw = w;
  std::vector<float> zeros(count, 0.0f), buf(count, 0.0f), am(count, 0.0f), av(count, 0.0f),
      got(count);
  DeviceBuffer dw(count * 4), dg(count * 4), db(count * 4), daw(count * 4), dam(count * 4),
      dav(count * 4);
  cuda::copy_to_device(dw.ptr, w.data(), count * 4);
  cuda::copy_to_device(daw.ptr, w.data(), count * 4);
  for (void* p : {db.ptr, dam.ptr, dav.ptr}) cuda::copy_to_device(p, zeros.data(), count * 4);
  host::NsWorkspace hws(m, n);
  cuda::NsWorkspace dws(m, n, cuda::Storage::f32);
  for (long t = 1; t <= 3; ++t) {
    const auto g = testing::random_matrix(m, n, 10 + static_cast<unsigned>(t));
    cuda::copy_to_device(dg.ptr, g.data(), count * 4);
    host::muon_step(w.data(), g.data(), buf.data(), m, n, t, MuonConfig{}, hws, "w");
    cuda::muon_step(ctx, dw.f(), dg.f(), db.f(), m, n, t, MuonConfig{}, dws, bad.data());
    host::adamw_step(aw.data(), g.data(), am.data(), av.data(), count, t, AdamWConfig{}, "w");
    cuda::adamw_step(ctx, daw.f(), dg.ptr, cuda::Storage::f32, dam.f(), dav.f(), count, t,
                     AdamWConfig{}, bad.data());
  }
  ctx.synchronize();
  cuda::copy_to_host(got.data(), dw.ptr, count * 4);
  EXPECT_LT(testing::rel_diff(got, w), 1e-5);
  cuda::copy_to_host(got.data(), daw.ptr, count * 4);
  EXPECT_LT(testing::rel_diff(got, aw), 1e-6);
  EXPECT_EQ(read(ctx, bad), 0u);
}

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

TEST(CudaKernels, SyntheticRowsAreBitIdenticalToTheGenerator) {
  std::string why;
  if (!have_gpu(&why)) GTEST_SKIP() << why;
  cuda::Context ctx;
  const std::size_t rows = 5, cols = 3000;
  const std::uint64_t seed = 17, step = 4, first = 1000, pid = 9, stream = 1;
  DeviceBuffer d(rows * cols * 4);
  cuda::synthetic_rows(ctx, d.ptr, cuda::Storage::f32, rows, cols, seed, step, first, pid, stream);
  ctx.synchronize();
  std::vector<float> got(rows * cols);
  cuda::copy_to_host(got.data(), d.ptr, got.size() * 4);
  for (std::size_t r = 0; r < rows; ++r) {
    std::uint64_t h = splitmix64(seed);
    h = splitmix64(h ^ step);
    h = splitmix64(h ^ pid);
    h = splitmix64(h ^ stream);
    const std::uint64_t key = splitmix64(h ^ (first + r));
    for (std::size_t i = 0; i < cols; ++i) {
      const float want = static_cast<float>(static_cast<std::int64_t>(splitmix64(key + i) >> 40)) *
                             (1.0f / 8388608.0f) -
                         1.0f;
      ASSERT_EQ(got[r * cols + i], want) << r << "," << i;
    }
  }
}

TEST(CudaKernels, NonFiniteInputIsCountedNotThrown) {
  std::string why;
  if (!have_gpu(&why)) GTEST_SKIP() << why;
  cuda::Context ctx;
  cuda::DeviceCounters bad(1);
  const std::size_t m = 64, n = 192;
  auto g = testing::random_matrix(m, n, 4);
  g[7] = std::numeric_limits<float>::quiet_NaN();
  cuda::NsWorkspace ws(m, n, cuda::Storage::f32);
  DeviceBuffer dg(m * n * 4), dout(m * n * 4);
  cuda::copy_to_device(dg.ptr, g.data(), m * n * 4);
  cuda::newton_schulz(ctx, dg.ptr, dout.ptr, m, n, cuda::Storage::f32, NsConfig{}, ws, bad.data());
  EXPECT_EQ(read(ctx, bad), 1u);
  cuda::zero_counters(ctx, bad.data(), 1);
  std::vector<float> buf(m * n, 0.0f);
  DeviceBuffer dbuf(m * n * 4), din(m * n * 2);
  cuda::muon_momentum(ctx, dg.ptr, cuda::Storage::f32, dbuf.f(), din.ptr, cuda::Storage::bf16,
                      m * n, 1, 0.95f, true, bad.data());
  EXPECT_EQ(read(ctx, bad), 1u);
}

}  // namespace
}  // namespace dmuon::kernels
