// dmuon_ns_emulate: the CUDA Newton–Schulz op sequence (kernels/cuda/ns_plan.hpp) on the CPU,
// rounding every stored matrix to the iteration type exactly where the GPU does (RNE, via
// host_rounding.hpp), with exact or sequential-fp32 GEMM accumulation, against an fp64 oracle.
// No GPU needed. It produced the numbers behind the Gram iteration type (newton_schulz.cu) and
// the NS tolerances of dmuon_cuda_check (ns_bound); rerun it when either changes.
//
//   dmuon_ns_emulate [--gaussian] [--fp32-acc] [--shape RxC]...
//
// Default inputs are dmuon_cuda_check's (k/64, k uniform in [-255, 255]) on its shapes. Output:
// relative Frobenius error vs fp64 and the same in units of the iteration type's unit roundoff.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/ns_plan.hpp"
#include "kernels/cuda/standalone/host_rounding.hpp"

namespace {

using namespace dmuon::kernels;
namespace plan = dmuon::kernels::cuda::plan;
namespace hr = dmuon::kernels::cuda::host_rounding;
using Mat = std::vector<double>;

enum class T { f32, bf16, f16 };

float round_to(T t, float v) {
  return t == T::f32 ? v : (t == T::bf16 ? hr::round_bf16(v) : hr::round_f16(v));
}
double unit_roundoff(T t) {
  return t == T::f32 ? std::ldexp(1.0, -24)
                     : (t == T::bf16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11));
}
const char* name(T t) {
  return t == T::f32 ? "f32" : (t == T::bf16 ? "bf16" : "f16");
}

bool g_fp32_acc = false;

/// The GPU executor's semantics on the CPU: every GEMM through the column-major call, every
/// stored element rounded to the iteration type `it`; copy_out rounds to the storage type.
struct Emu {
  plan::Shape s;
  int blocks;
  T it, storage;
  std::vector<std::vector<float>> buf;
  std::vector<float>* out;

  float* ptr(int b) {
    return b == plan::kOut ? out->data() : buf[static_cast<std::size_t>(b)].data();
  }
  void gemm_at(const plan::RowMajorGemm& g, float alpha, int a, std::size_t ao, int b,
               std::size_t bo, int c, std::size_t co) {
    const plan::ColumnMajorGemm cm = plan::to_column_major(g);
    const float* first = ptr(b) + bo;
    const float* second = ptr(a) + ao;
    float* cp = ptr(c) + co;
    for (std::size_t r = 0; r < cm.m; ++r) {
      for (std::size_t col = 0; col < cm.n; ++col) {
        double exact = 0.0;
        float seq = 0.0f;
        for (std::size_t p = 0; p < cm.k; ++p) {
          const float f = cm.trans_first ? first[p + r * cm.ld_first] : first[r + p * cm.ld_first];
          const float v =
              cm.trans_second ? second[col + p * cm.ld_second] : second[p + col * cm.ld_second];
          exact += static_cast<double>(f) * v;
          seq = std::fma(f, v, seq);
        }
        const float acc = g_fp32_acc ? seq : static_cast<float>(exact);
        cp[r + col * cm.ldc] = round_to(it, alpha * acc);
      }
    }
  }
  void gemm(const plan::RowMajorGemm& g, float alpha, int a, int b, int c) {
    gemm_at(g, alpha, a, 0, b, 0, c, 0);
  }
  void sym(plan::SymKind kind, float alpha, int a, int b, int c) {
    const plan::SymPlan p = plan::sym_plan(kind, s, blocks);
    for (const plan::Tile& t : p.tiles) gemm_at(p.gemm, alpha, a, t.a, b, t.b, c, t.c);
  }
  void combine(int r, int r2, int dst, float a, float b, float c) {
    const std::size_t m = s.m;
    std::vector<float> res(m * m);
    for (std::size_t i = 0; i < m; ++i) {
      for (std::size_t j = 0; j < m; ++j) {
        const std::size_t u = std::min(i, j) * m + std::max(i, j);
        float v = b * ptr(r)[u];
        if (r2 >= 0) v += c * ptr(r2)[u];
        if (i == j) v += a;
        res[i * m + j] = round_to(it, v);
      }
    }
    std::copy(res.begin(), res.end(), ptr(dst));
  }
  void mirror(int c) { combine(c, -1, c, 0.0f, 1.0f, 0.0f); }
  void sym_poly(int r, int r2, int p, float a, float b, float c) { combine(r, r2, p, a, b, c); }
  void poly_add(int a_buf, int b_buf, float a, float b) {
    const std::size_t m = s.m;
    for (std::size_t idx = 0; idx < m * m; ++idx) {
      float v = ptr(b_buf)[idx] + b * ptr(a_buf)[idx];
      if (idx % (m + 1) == 0) v += a;
      ptr(b_buf)[idx] = round_to(it, v);
    }
  }
  void copy_out(int x) {
    const auto& src = buf[static_cast<std::size_t>(x)];
    for (std::size_t i = 0; i < src.size(); ++i) (*out)[i] = round_to(storage, src[i]);
  }
};

/// g (already representable in `storage`) through the plan with iteration type `it`.
std::vector<float> emulate(const std::vector<float>& g, std::size_t rows, std::size_t cols,
                           const NsConfig& cfg, T storage, T it) {
  Emu e{plan::ns_shape(rows, cols), 0, it, storage, {}, nullptr};
  e.blocks = plan::default_sym_blocks(e.s.m);
  const plan::Scales sc = plan::ns_scales(e.s);
  for (int b = 0; b < plan::kNumBuffers; ++b) {
    e.buf.emplace_back(plan::is_x_buffer(b) ? e.s.m * e.s.n : e.s.m * e.s.m,
                       std::numeric_limits<float>::quiet_NaN());
  }
  std::vector<float> out(rows * cols, std::numeric_limits<float>::quiet_NaN());
  e.out = &out;
  double ss = 0.0;
  for (float v : g) ss += static_cast<double>(v) * v;
  const float inv =
      (1.0f / (static_cast<float>(std::sqrt(ss)) + cfg.eps)) * static_cast<float>(sc.x);
  for (std::size_t i = 0; i < g.size(); ++i) e.buf[plan::kX][i] = round_to(it, g[i] * inv);
  if (cfg.variant == NsVariant::direct) {
    plan::run_direct(e, e.s, cfg, sc);
  } else {
    plan::run_gram(e, e.s, cfg, sc, storage != it);
  }
  return out;
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
    const auto co = ns_step_coefficients(cfg.coefficients, k);
    const Mat a = matmul(x, transpose(x, m, n), m, n, m);
    const Mat a2 = matmul(a, a, m, m, m);
    Mat b(m * m);
    for (std::size_t i = 0; i < m * m; ++i) b[i] = co.b * a[i] + co.c * a2[i];
    const Mat bx = matmul(b, x, m, m, n);
    for (std::size_t i = 0; i < m * n; ++i) x[i] = co.a * x[i] + bx[i];
  }
  return tall ? transpose(x, m, n) : x;
}
double rel_diff(const std::vector<float>& got, const Mat& ref) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / den);
}

}  // namespace

int main(int argc, char** argv) {
  bool gaussian = false;
  std::vector<std::pair<std::size_t, std::size_t>> shapes;
  for (int i = 1; i < argc; ++i) {
    std::size_t r = 0, c = 0;
    if (std::strcmp(argv[i], "--gaussian") == 0) {
      gaussian = true;
    } else if (std::strcmp(argv[i], "--fp32-acc") == 0) {
      g_fp32_acc = true;
    } else if (std::strcmp(argv[i], "--shape") == 0 && i + 1 < argc &&
               std::sscanf(argv[i + 1], "%zux%zu", &r, &c) == 2 && r > 0 && c > 0) {
      shapes.emplace_back(r, c);
      ++i;
    } else {
      std::fprintf(stderr, "usage: dmuon_ns_emulate [--gaussian] [--fp32-acc] [--shape RxC]...\n");
      return 2;
    }
  }
  if (shapes.empty()) {
    shapes = {{64, 192},  {192, 64},  {33, 70}, {160, 320},
              {256, 384}, {384, 256}, {96, 96}, {48, 80}};
  }
  struct Config {
    NsVariant variant;
    T storage, it;
  };
  const Config configs[] = {
      {NsVariant::direct, T::f32, T::f32}, {NsVariant::direct, T::bf16, T::bf16},
      {NsVariant::direct, T::f16, T::f16}, {NsVariant::gram, T::f32, T::f32},
      {NsVariant::gram, T::bf16, T::f16},  {NsVariant::gram, T::f16, T::f16},
      {NsVariant::gram, T::bf16, T::bf16}};
  std::printf(
      "# inputs: %s; GEMM accumulation: %s; relative Frobenius error vs fp64 (in units "
      "of the iteration type's u)\n",
      gaussian ? "Gaussian" : "k/64, k in [-255, 255]",
      g_fp32_acc ? "sequential fp32" : "exact, rounded once");
  std::printf("# %-9s %-13s", "shape", "coefficients");
  for (const Config& c : configs) {
    const std::string col =
        std::string(to_string(c.variant)) + " " + name(c.storage) + "/" + name(c.it);
    std::printf(" %20s", col.c_str());
  }
  std::printf("\n");
  for (const auto& [rows, cols] : shapes) {
    std::vector<float> g(rows * cols);
    std::mt19937 gen(7);
    if (gaussian) {
      std::normal_distribution<float> d(0.0f, 1.0f);
      for (auto& v : g) v = d(gen);
    } else {
      std::uniform_int_distribution<int> d(-255, 255);
      for (auto& v : g) v = static_cast<float>(d(gen)) / 64.0f;
    }
    for (auto set : {NsCoefficientSet::classic_muon, NsCoefficientSet::polar_express}) {
      NsConfig cfg;
      cfg.coefficients = set;
      std::printf("  %4zux%-4zu %-13s", rows, cols, std::string(to_string(set)).c_str());
      std::vector<float> gs(g.size());
      Mat ref;
      T ref_storage = T::f32;
      for (const Config& c : configs) {
        for (std::size_t i = 0; i < g.size(); ++i) gs[i] = round_to(c.storage, g[i]);
        if (ref.empty() || c.storage != ref_storage) {
          ref = ns_ref(Mat(gs.begin(), gs.end()), rows, cols, cfg);  // oracle of the stored input
          ref_storage = c.storage;
        }
        cfg.variant = c.variant;
        const double e = rel_diff(emulate(gs, rows, cols, cfg, c.storage, c.it), ref);
        std::printf(" %10.2e (%6.1fu)", e, e / unit_roundoff(c.it));
      }
      std::printf("\n");
    }
  }
  return 0;
}
