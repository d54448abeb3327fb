#pragma once
// The CUDA Newton–Schulz op sequence (ns_plan.hpp) on the CPU, rounding every stored matrix to
// its buffer's type exactly where the GPU does (RNE, via host_rounding.hpp), against an fp64
// oracle. No GPU needed: dmuon_ns_emulate prints tables with it, and
// tests/kernels/ns_emulation_test.cpp holds the rule of plan::ns_numerics to its error bounds
// (docs/KERNELS.md) in CI. GEMMs accumulate exactly and round once (what tensor cores with fp32
// accumulation approach), or sequentially in fp32 (an SGEMM's worst order) with `fp32_acc`.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "kernels/cuda/ns_plan.hpp"
#include "kernels/cuda/standalone/host_rounding.hpp"
#include "kernels/dtype.hpp"

namespace dmuon::kernels::cuda::emulation {

using Mat = std::vector<double>;

inline float round_to(Dtype t, float v) {
  switch (t) {
    case Dtype::bf16: return host_rounding::round_bf16(v);
    case Dtype::f16: return host_rounding::round_f16(v);
    case Dtype::f32: break;
  }
  return v;
}

/// Half the distance from 1 to the next value of the type.
inline double unit_roundoff(Dtype t) {
  switch (t) {
    case Dtype::bf16: return std::ldexp(1.0, -8);
    case Dtype::f16: return std::ldexp(1.0, -11);
    case Dtype::f32: break;
  }
  return std::ldexp(1.0, -24);
}

/// c (m×n) = a (m×k) · bᵀ (b is n×k), all row-major: a BLAS sgemm for large emulations (fp32
/// accumulation, as the GPU's GEMMs do); empty: exact products summed in double.
using DenseGemm = std::function<void(std::size_t m, std::size_t n, std::size_t k, const float* a,
                                     const float* b, float* c)>;

/// The GPU executor's semantics on the CPU (see the executor contract in ns_plan.hpp): every
/// GEMM through the column-major call cuBLAS receives, its operands read in their buffers'
/// types and its result rounded to the destination buffer's type.
struct Executor {
  plan::Shape s;
  int blocks = 1;
  plan::Numerics num;
  Dtype storage = Dtype::f32;
  bool fp32_acc = false;
  DenseGemm dense;
  std::vector<std::vector<float>> buf;
  std::vector<float>* out = nullptr;

  Dtype type_of(int b) const {
    if (b == plan::kOut) return storage;
    return plan::buffer_type(num, b);
  }
  float* ptr(int b) {
    return b == plan::kOut ? out->data() : buf[static_cast<std::size_t>(b)].data();
  }

  void gemm_at(const plan::RowMajorGemm& g, float alpha, int a, std::size_t ao, int b,
               std::size_t bo, int c, std::size_t co) {
    const plan::ColumnMajorGemm cm = plan::to_column_major(g);
    const float* first = ptr(b) + bo;
    const float* second = ptr(a) + ao;
    float* cp = ptr(c) + co;
    const Dtype ct = type_of(c);
    const std::size_t k = cm.k;
    // op(first) rows and op(second) columns, gathered contiguous in k.
    std::vector<float> fr(cm.m * k), sc(cm.n * k);
    for (std::size_t r = 0; r < cm.m; ++r)
      for (std::size_t p = 0; p < k; ++p)
        fr[r * k + p] = cm.trans_first ? first[p + r * cm.ld_first] : first[r + p * cm.ld_first];
    for (std::size_t j = 0; j < cm.n; ++j)
      for (std::size_t p = 0; p < k; ++p)
        sc[j * k + p] =
            cm.trans_second ? second[j + p * cm.ld_second] : second[p + j * cm.ld_second];
    if (dense) {
      std::vector<float> prod(cm.m * cm.n);
      dense(cm.m, cm.n, k, fr.data(), sc.data(), prod.data());
      for (std::size_t r = 0; r < cm.m; ++r)
        for (std::size_t j = 0; j < cm.n; ++j)
          cp[r + j * cm.ldc] = round_to(ct, alpha * prod[r * cm.n + j]);
      return;
    }
    for (std::size_t r = 0; r < cm.m; ++r) {
      const float* x = &fr[r * k];
      for (std::size_t j = 0; j < cm.n; ++j) {
        const float* y = &sc[j * k];
        float acc;
        if (fp32_acc) {
          acc = 0.0f;
          for (std::size_t p = 0; p < k; ++p) acc = std::fma(x[p], y[p], acc);
        } else {
          // Products of stored values are exact in double; four partial sums (the order is
          // immaterial at double precision next to the one fp32 rounding).
          double s[4] = {0, 0, 0, 0};
          std::size_t p = 0;
          for (; p + 4 <= k; p += 4)
            for (int q = 0; q < 4; ++q) s[q] += static_cast<double>(x[p + q]) * y[p + q];
          for (; p < k; ++p) s[0] += static_cast<double>(x[p]) * y[p];
          acc = static_cast<float>((s[0] + s[1]) + (s[2] + s[3]));
        }
        cp[r + j * cm.ldc] = round_to(ct, alpha * acc);
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
        res[i * m + j] = round_to(type_of(dst), v);
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
      ptr(b_buf)[idx] = round_to(type_of(b_buf), v);
    }
  }
  void convert(int src, int dst, std::size_t count) {
    const Dtype t = type_of(dst);
    for (std::size_t i = 0; i < count; ++i) ptr(dst)[i] = round_to(t, ptr(src)[i]);
  }
  void copy_out(int x) { convert(x, plan::kOut, s.m * s.n); }
  void narrow(int m_buf, int dst) { convert(m_buf, dst, s.m * s.m); }
};

/// g (representable in `storage`) through the plan with numerics `num`, as the GPU runs it.
inline std::vector<float> newton_schulz(const std::vector<float>& g, std::size_t rows,
                                        std::size_t cols, const NsConfig& cfg, Dtype storage,
                                        const plan::Numerics& num, bool fp32_acc = false,
                                        const DenseGemm& dense = {}) {
  Executor e;
  e.dense = dense;
  e.s = plan::ns_shape(rows, cols);
  e.blocks = plan::default_sym_blocks(e.s.m);
  e.num = num;
  e.storage = storage;
  e.fp32_acc = fp32_acc;
  const plan::Scales sc = plan::ns_scales(e.s);
  for (int b = 0; b < plan::kNumBuffers; ++b)
    e.buf.emplace_back(plan::is_x_buffer(b) ? e.s.m * e.s.n : e.s.m * e.s.m,
                       std::numeric_limits<float>::quiet_NaN());
  std::vector<float> out(rows * cols, std::numeric_limits<float>::quiet_NaN());
  e.out = &out;
  double ss = 0.0;
  for (float v : g) ss += static_cast<double>(v) * v;
  const float inv =
      (1.0f / (static_cast<float>(std::sqrt(ss)) + cfg.eps)) * static_cast<float>(sc.x);
  for (std::size_t i = 0; i < g.size(); ++i) e.buf[plan::kX][i] = round_to(num.x, g[i] * inv);
  plan::run(e, e.s, cfg, sc, num, storage);
  return out;
}

// ---- the fp64 oracle ----------------------------------------------------------------------------

inline Mat matmul(const Mat& a, const Mat& b, std::size_t m, std::size_t k, std::size_t n) {
  Mat c(m * n, 0.0);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t p = 0; p < k; ++p)
      for (std::size_t j = 0; j < n; ++j) c[i * n + j] += a[i * k + p] * b[p * n + j];
  return c;
}
inline Mat transpose(const Mat& a, std::size_t r, std::size_t c) {
  Mat t(r * c);
  for (std::size_t i = 0; i < r; ++i)
    for (std::size_t j = 0; j < c; ++j) t[j * r + i] = a[i * c + j];
  return t;
}
/// SPEC §7's direct iteration in double.
inline Mat oracle(Mat x, std::size_t rows, std::size_t cols, const NsConfig& cfg) {
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

/// ‖got − ref‖_F / ‖ref‖_F.
inline double rel_diff(const std::vector<float>& got, const Mat& ref) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double d = static_cast<double>(got[i]) - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / den);
}

// ---- inputs -------------------------------------------------------------------------------------

/// dmuon_cuda_check's well-conditioned input: k/64 with k uniform in [-255, 255].
inline std::vector<float> dyadic(std::size_t rows, std::size_t cols, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> d(-255, 255);
  std::vector<float> g(rows * cols);
  for (auto& v : g) v = static_cast<float>(d(gen)) / 64.0f;
  return g;
}

/// A·B with A (rows×inner) and B (inner×cols) standard normal: for inner = min(rows, cols) the
/// condition of a gradient averaged over as many samples as it has columns (a square product
/// has σ_min ≈ 0); for inner < min(rows, cols) a rank-`inner` (rank-deficient) gradient.
inline std::vector<float> product(std::size_t rows, std::size_t inner, std::size_t cols,
                                  unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> d(0.0, 1.0);
  Mat a(rows * inner), b(inner * cols);
  for (auto& v : a) v = d(gen);
  for (auto& v : b) v = d(gen);
  const Mat c = matmul(a, b, rows, inner, cols);
  return std::vector<float>(c.begin(), c.end());
}

/// Every value rounded to `t` (what a `t` buffer holds).
inline std::vector<float> stored_as(Dtype t, std::vector<float> g) {
  for (auto& v : g) v = round_to(t, v);
  return g;
}

// ---- the error bounds (docs/KERNELS.md "Newton–Schulz numerics") -------------------------------

/// ∏ |a_k|: how much the iteration amplifies a direction the input lacks (its odd polynomial's
/// slope at 0), which is where rounding X̃ puts something the oracle does not have.
inline double null_gain(const NsConfig& cfg) {
  double g = 1;
  for (const auto& co : ns_schedule(cfg.coefficients, cfg.steps)) g *= std::fabs(co.a);
  return g;
}

/// The relative error numerics `num` are held to on input stored in `storage`, in units of the
/// X type's u (what every step rounds X̃ to), plus one rounding of the output when the X type
/// is not the storage type. Full-rank input (well- or ill-conditioned): c·u — 16-bit X̃ (the
/// direct form, or the Gram form with fp32 m×m matrices) c = 24; fp32 c = 128 direct and 4096
/// Gram (R = X Xᵀ squares the condition number). Rank-deficient input: c·null_gain·u — c = 0.5
/// (16-bit), 2 (fp32 direct), 12 (fp32 Gram). The constants are dmuon_ns_emulate's worst cases
/// (ns_emulation_test's inputs; fp32 with sequential fp32 accumulation) times >= 2.4. Not for
/// 16-bit Gram matrices, which no such bound holds (the rule never picks them).
inline double ns_error_bound(const NsConfig& cfg, Dtype storage, const NsNumerics& num,
                             bool rank_deficient) {
  const bool f32 = num.x == Dtype::f32, direct = num.form == NsVariant::direct;
  double c = !f32 ? 24 : (direct ? 128 : 4096);
  if (rank_deficient) c = (!f32 ? 0.5 : (direct ? 2 : 12)) * null_gain(cfg);
  return c * unit_roundoff(num.x) + (num.x != storage ? unit_roundoff(storage) : 0.0);
}

/// A bound of 0.5 or more says nothing (a 16-bit NS of a rank-deficient input: bf16's is ~0.3).
inline constexpr double kMeaningfulBound = 0.5;

/// The emulated relative error of plan numerics `num` on g stored in `storage`, against the
/// fp64 oracle of the stored input.
inline double ns_error(const std::vector<float>& g, std::size_t rows, std::size_t cols,
                       const NsConfig& cfg, Dtype storage, const plan::Numerics& num,
                       bool fp32_acc = false) {
  const std::vector<float> gs = stored_as(storage, g);
  const Mat ref = oracle(Mat(gs.begin(), gs.end()), rows, cols, cfg);
  return rel_diff(newton_schulz(gs, rows, cols, cfg, storage, num, fp32_acc), ref);
}

}  // namespace dmuon::kernels::cuda::emulation
