// dmuon_cuda_check: correctness of the CUDA kernels against an fp64 CPU oracle on small
// shapes, then a bf16 Newton–Schulz benchmark (4096×4096, 4096×14336) with the ratio to a cuBLAS
// bf16 GEMM of the same run. Exit codes: 0 all checks passed, 1 a check failed, 77 no GPU
// (cudaGetDeviceCount error or zero devices), 2 an unexpected error.
//
// The CPU oracle uses plain loops: it is a test oracle on small matrices, not a production GEMM.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/kernels.hpp"
#include "kernels/kernel_error.hpp"

namespace {

namespace cu = dmuon::kernels::cuda;
using dmuon::kernels::KernelError;
using dmuon::kernels::NsCoefficientSet;
using dmuon::kernels::NsConfig;
using dmuon::kernels::NsVariant;
using Mat = std::vector<double>;

int g_failures = 0;

void verdict(const std::string& what, double value, double bound) {
  const bool ok = value <= bound;
  if (!ok) ++g_failures;
  std::printf("  %-52s %10.3e %10.1e  %s\n", what.c_str(), value, bound, ok ? "OK" : "FAILED");
}

std::vector<float> random_vec(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

Mat matmul(const Mat& a, const Mat& b, std::size_t m, std::size_t k, std::size_t n) {
  Mat c(m * n, 0.0);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t p = 0; p < k; ++p)
      for (std::size_t j = 0; j < n; ++j) c[i * n + j] += a[i * k + p] * b[p * n + j];
  return c;
}
Mat transpose(const Mat& a, std::size_t r, std::size_t c) {
  Mat t(r * c);
  for (std::size_t i = 0; i < r; ++i)
    for (std::size_t j = 0; j < c; ++j) t[j * r + i] = a[i * c + j];
  return t;
}

// SPEC §7 Newton–Schulz in fp64, explicit transpose for tall input.
Mat ns_ref(Mat x, std::size_t rows, std::size_t cols, const NsConfig& cfg) {
  const bool tall = rows > cols;
  std::size_t m = rows, n = cols;
  if (tall) {
    x = transpose(x, rows, cols);
    std::swap(m, n);
  }
  double ss = 0;
  for (double v : x) ss += v * v;
  for (double& v : x) v /= std::sqrt(ss) + cfg.eps;
  for (int k = 0; k < cfg.steps; ++k) {
    const auto co = dmuon::kernels::ns_step_coefficients(cfg.coefficients, k);
    const Mat a = matmul(x, transpose(x, m, n), m, n, m);
    const Mat a2 = matmul(a, a, m, m, m);
    Mat b(m * m);
    for (std::size_t i = 0; i < m * m; ++i) b[i] = co.b * a[i] + co.c * a2[i];
    const Mat bx = matmul(b, x, m, m, n);
    for (std::size_t i = 0; i < m * n; ++i) x[i] = co.a * x[i] + bx[i];
  }
  return tall ? transpose(x, m, n) : x;
}

template <class A, class B>
double rel_diff(const A& a, const B& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = double(a[i]) - double(b[i]);
    num += d * d;
    den += double(b[i]) * double(b[i]);
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

struct Dev {
  explicit Dev(std::size_t bytes) : p(cu::device_alloc(bytes)) {}
  ~Dev() { cu::device_free(p); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  float* f() { return static_cast<float*>(p); }
  void* p;
};

void check_ns(cu::Context& ctx) {
  std::printf("# Newton-Schulz vs fp64 CPU oracle (relative Frobenius error)\n");
  for (const auto& [m, n] :
       std::vector<std::pair<std::size_t, std::size_t>>{{64, 192}, {192, 64}, {96, 96}, {33, 70}}) {
    const auto g = random_vec(m * n, 7);
    for (auto set : {NsCoefficientSet::classic_muon, NsCoefficientSet::polar_express}) {
      NsConfig cfg;
      cfg.coefficients = set;
      const Mat ref = ns_ref(Mat(g.begin(), g.end()), m, n, cfg);
      for (auto variant : {NsVariant::direct, NsVariant::gram}) {
        cfg.variant = variant;
        for (auto st : {cu::Storage::f32, cu::Storage::bf16, cu::Storage::f16}) {
          cu::NsWorkspace ws(m, n, st);
          Dev d32(m * n * 4), ds(m * n * 4);
          cu::copy_to_device(d32.p, g.data(), m * n * 4);
          cu::convert_from_f32(ctx, d32.f(), ds.p, m * n, st);
          cu::newton_schulz(ctx, ds.p, ds.p, m, n, st, cfg, ws, "check");
          cu::convert_to_f32(ctx, ds.p, d32.f(), m * n, st);
          ctx.synchronize();
          std::vector<float> got(m * n);
          cu::copy_to_host(got.data(), d32.p, m * n * 4);
          // fp32: rounding amplified by the iteration (host path measures ~1e-5); 16-bit
          // storage: 2^-8 (bf16) / 2^-11 (f16) per rounding of X, A, B over 5 steps.
          const double bound =
              st == cu::Storage::f32 ? 2e-4 : (st == cu::Storage::bf16 ? 6e-2 : 1e-2);
          verdict(std::to_string(m) + "x" + std::to_string(n) + " " +
                      std::string(dmuon::kernels::to_string(set)) + " " +
                      std::string(dmuon::kernels::to_string(variant)) + " " +
                      std::string(cu::to_string(st)),
                  rel_diff(got, ref), bound);
        }
      }
    }
  }
}

void check_optimizers(cu::Context& ctx) {
  std::printf("# Muon / AdamW steps vs fp64 CPU oracle (max abs error on weights)\n");
  const std::size_t rows = 48, cols = 80, n = rows * cols;
  dmuon::kernels::MuonConfig mc;
  mc.weight_decay = 0.1f;
  auto w = random_vec(n, 1);
  Mat rw(w.begin(), w.end()), rbuf(n, 0.0);
  Dev dw(n * 4), dg(n * 4), db(n * 4);
  cu::copy_to_device(dw.p, w.data(), n * 4);
  std::vector<float> zeros(n, 0.0f);
  cu::copy_to_device(db.p, zeros.data(), n * 4);
  cu::NsWorkspace ws(rows, cols, cu::Storage::f32);
  for (long t = 1; t <= 3; ++t) {
    const auto g = random_vec(n, 10 + static_cast<unsigned>(t));
    cu::copy_to_device(dg.p, g.data(), n * 4);
    cu::muon_step(ctx, dw.f(), dg.f(), db.f(), rows, cols, t, mc, ws, "check.muon");
    Mat in(n);
    for (std::size_t i = 0; i < n; ++i) {
      rbuf[i] = t == 1 ? g[i] : mc.momentum * rbuf[i] + g[i];
      in[i] = g[i] + double(mc.momentum) * rbuf[i];
    }
    const Mat o = ns_ref(in, rows, cols, mc.ns);
    const double scale = 0.2 * std::sqrt(double(std::max(rows, cols)));
    for (std::size_t i = 0; i < n; ++i) {
      rw[i] = (1.0 - double(mc.lr) * mc.weight_decay) * rw[i] - double(mc.lr) * scale * o[i];
    }
  }
  ctx.synchronize();
  cu::copy_to_host(w.data(), dw.p, n * 4);
  double err = 0;
  for (std::size_t i = 0; i < n; ++i) err = std::max(err, std::abs(w[i] - rw[i]));
  verdict("muon_step 48x80 x3 (f32, wd 0.1)", err, 2e-5);

  dmuon::kernels::AdamWConfig ac;
  auto aw = random_vec(n, 2);
  Mat raw(aw.begin(), aw.end()), rm(n, 0.0), rv(n, 0.0);
  Dev dm(n * 4), dv(n * 4);
  cu::copy_to_device(dw.p, aw.data(), n * 4);
  cu::copy_to_device(dm.p, zeros.data(), n * 4);
  cu::copy_to_device(dv.p, zeros.data(), n * 4);
  for (long t = 1; t <= 5; ++t) {
    const auto g = random_vec(n, 30 + static_cast<unsigned>(t));
    cu::copy_to_device(dg.p, g.data(), n * 4);
    cu::adamw_step(ctx, dw.f(), dg.f(), dm.f(), dv.f(), n, t, ac, "check.adamw");
    for (std::size_t i = 0; i < n; ++i) {
      raw[i] *= 1.0 - double(ac.lr) * ac.weight_decay;
      rm[i] = ac.beta1 * rm[i] + (1.0 - ac.beta1) * g[i];
      rv[i] = ac.beta2 * rv[i] + (1.0 - ac.beta2) * double(g[i]) * g[i];
      const double mh = rm[i] / (1.0 - std::pow(double(ac.beta1), double(t)));
      const double vh = rv[i] / (1.0 - std::pow(double(ac.beta2), double(t)));
      raw[i] -= ac.lr * mh / (std::sqrt(vh) + ac.eps);
    }
  }
  ctx.synchronize();
  cu::copy_to_host(aw.data(), dw.p, n * 4);
  err = 0;
  for (std::size_t i = 0; i < n; ++i) err = std::max(err, std::abs(aw[i] - raw[i]));
  verdict("adamw_step 3840 x5", err, 2e-6);

  // Non-finite gradient: must throw naming the parameter.
  std::vector<float> bad(n, 0.1f);
  bad[5] = std::nanf("");
  cu::copy_to_device(dg.p, bad.data(), n * 4);
  bool named = false;
  try {
    cu::muon_step(ctx, dw.f(), dg.f(), db.f(), rows, cols, 4, mc, ws, "layers.7.w2");
  } catch (const KernelError& e) {
    named = std::string(e.what()).find("layers.7.w2") != std::string::npos;
  }
  verdict("non-finite gradient names the parameter (0 = yes)", named ? 0.0 : 1.0, 0.0);

  // Pack/unpack round trip, bit-exact.
  const auto a = random_vec(1000, 3), b = random_vec(37, 4);
  Dev da(1000 * 4), dbb(37 * 4), dp(1037 * 4), da2(1000 * 4), db2(37 * 4);
  cu::copy_to_device(da.p, a.data(), 1000 * 4);
  cu::copy_to_device(dbb.p, b.data(), 37 * 4);
  const dmuon::kernels::ConstSlice parts[] = {{da.f(), 1000}, {dbb.f(), 37}};
  cu::pack(ctx, parts, 2, dp.f(), 1037);
  const dmuon::kernels::Slice outs[] = {{da2.f(), 1000}, {db2.f(), 37}};
  cu::unpack(ctx, dp.f(), 1037, outs, 2);
  ctx.synchronize();
  std::vector<float> a2(1000), b2(37);
  cu::copy_to_host(a2.data(), da2.p, 1000 * 4);
  cu::copy_to_host(b2.data(), db2.p, 37 * 4);
  const bool same =
      std::memcmp(a.data(), a2.data(), 4000) == 0 && std::memcmp(b.data(), b2.data(), 37 * 4) == 0;
  verdict("pack/unpack round trip bit-exact (0 = yes)", same ? 0.0 : 1.0, 0.0);
}

void bench(cu::Context& ctx, int iters) {
  std::printf(
      "#\n# bf16 Newton-Schulz (5 steps, Polar Express), TFLOP/s with the direct-NS FLOP\n"
      "# count 5*(4m^2n + 2m^3); GEMM = cuBLAS bf16 (m x n x m: the X X^T-sized GEMM)\n");
  std::printf("# %12s %8s %10s %12s %12s %10s\n", "shape", "form", "time_ms", "NS_TFLOP/s",
              "GEMM_TFLOP/s", "NS/GEMM");
  for (const auto& [m, n] :
       std::vector<std::pair<std::size_t, std::size_t>>{{4096, 4096}, {4096, 14336}}) {
    const auto st = cu::Storage::bf16;
    Dev d32(m * n * 4), g(m * n * 2), out(m * n * 2), c(m * m * 2);
    const auto host = random_vec(m * n, 5);
    cu::copy_to_device(d32.p, host.data(), m * n * 4);
    cu::convert_from_f32(ctx, d32.f(), g.p, m * n, st);
    // cuBLAS reference: C (m×m) = X Xᵀ, 2m²n FLOPs.
    cu::EventTimer timer(ctx);
    for (int i = 0; i < 2; ++i) cu::gemm(ctx, st, false, true, m, m, n, 1.0f, g.p, g.p, 0.0f, c.p);
    timer.start();
    for (int i = 0; i < iters; ++i)
      cu::gemm(ctx, st, false, true, m, m, n, 1.0f, g.p, g.p, 0.0f, c.p);
    const double gemm_ms = timer.stop_ms() / iters;
    const double gemm_tflops = 2.0 * m * m * n / (gemm_ms * 1e-3) / 1e12;
    for (auto variant : {NsVariant::direct, NsVariant::gram}) {
      NsConfig cfg;
      cfg.variant = variant;
      cu::NsWorkspace ws(m, n, st);
      for (int i = 0; i < 2; ++i) cu::newton_schulz(ctx, g.p, out.p, m, n, st, cfg, ws, "bench");
      timer.start();
      for (int i = 0; i < iters; ++i)
        cu::newton_schulz(ctx, g.p, out.p, m, n, st, cfg, ws, "bench");
      const double ms = timer.stop_ms() / iters;
      const double tflops = dmuon::kernels::ns_direct_flops(m, n, 5) / (ms * 1e-3) / 1e12;
      std::printf("  %5zux%-6zu %8s %10.3f %12.1f %12.1f %10.3f\n", m, n,
                  std::string(dmuon::kernels::to_string(variant)).c_str(), ms, tflops, gemm_tflops,
                  tflops / gemm_tflops);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 10;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
      iters = std::max(1, std::atoi(argv[++i]));
  }
  int devices = 0;
  try {
    devices = cu::device_count();
  } catch (const KernelError& e) {
    std::fprintf(stderr, "dmuon_cuda_check: no GPU available: %s\n", e.what());
    return 77;
  }
  if (devices == 0) {
    std::fprintf(stderr, "dmuon_cuda_check: no GPU available: cudaGetDeviceCount returned 0\n");
    return 77;
  }
  try {
    std::printf("# dmuon_cuda_check: %d GPU(s) visible\n", devices);
    std::printf("  %-52s %10s %10s  %s\n", "check", "error", "bound", "result");
    cu::Context ctx;
    check_ns(ctx);
    check_optimizers(ctx);
    bench(ctx, iters);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dmuon_cuda_check: unexpected error: %s\n", e.what());
    return 2;
  }
  std::printf("# %s (%d failed check(s))\n", g_failures == 0 ? "OK" : "FAILED", g_failures);
  return g_failures == 0 ? 0 : 1;
}
