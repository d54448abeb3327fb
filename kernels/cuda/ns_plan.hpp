#pragma once
// The CUDA Newton–Schulz as a plan: shapes, power-of-two range scales, the tiling of the
// symmetric products and the op sequence of both forms, written against an abstract executor.
// Pure C++17 (no CUDA types), so the same sequence runs on the GPU (optimizer.cu: cuBLAS +
// small kernels) and in tests/kernels/cuda_kernels_test.cpp on the CPU, where an emulating
// executor checks the tiling, the operand orientation and the buffer rotation against the host
// kernels without a GPU. Private to kernels/cuda and its tests: not part of the kernel API.
//
// Conventions: every matrix is row-major. The iterated matrix is the wide X (m×n, m <= n),
// stored in the caller's orientation: X itself (m×n) when !trans, Xᵀ (n×m) when trans (tall
// input), so transposition lives in the GEMM flags and nothing is copied.
//
// Range scales (why: fp16 has 5 exponent bits). After X ← G/(‖G‖_F + eps) the entries of X are
// about 1/sqrt(mn) (1.3e-4 at 4096×14336, next to fp16's smallest normal 6.1e-5) and the
// off-diagonal entries of R = X Xᵀ are about 1/(m·sqrt(n)) (2e-6: fp16 subnormals, a few
// significant bits). The plan therefore stores X̃ = t·X and R̃ = s·R with t, s powers of two
// and folds 1/t, 1/s into GEMM alphas and polynomial coefficients. Powers of two are exact in
// every storage type, so in fp32 this changes nothing but the exponents; in fp16 it keeps X̃
// (|X̃| <= 1.2·t <= 2^14.3) and R̃ (eigenvalues <= 1.44·s <= 2^14.6) in the normal range, below
// fp16's 65504. The m×m operators P, Q, B (eigenvalues <= ~64) are stored unscaled.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/cuda/ns_numerics.hpp"
#include "kernels/dtype.hpp"
#include "kernels/ns_coefficients.hpp"

namespace dmuon::kernels::cuda::plan {

/// Row-major C (m×n, row stride ldc) = alpha·op(A)·op(B) + beta·C with op(A) m×k, op(B) k×n;
/// lda and ldb are the row strides of A and B as stored (A is k×m when trans_a).
struct RowMajorGemm {
  bool trans_a, trans_b;
  std::size_t m, n, k, lda, ldb, ldc;
};

/// Densely stored operands (row strides at least 1, as cuBLAS requires even for k = 0).
constexpr RowMajorGemm dense_gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n,
                                  std::size_t k) {
  const std::size_t one = 1;
  return {trans_a,
          trans_b,
          m,
          n,
          k,
          std::max(trans_a ? m : k, one),
          std::max(trans_b ? k : n, one),
          std::max(n, one)};
}

/// The same product as cuBLAS (column-major) sees it: a row-major matrix is its column-major
/// transpose, so row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ. The call is
/// cublasGemmEx(op(trans_first), op(trans_second), m, n, k, alpha, B, ld_first, A, ld_second,
/// beta, C, ldc): the FIRST cuBLAS operand is the row-major B.
struct ColumnMajorGemm {
  bool trans_first, trans_second;
  std::size_t m, n, k, ld_first, ld_second, ldc;
};

constexpr ColumnMajorGemm to_column_major(const RowMajorGemm& g) {
  return {g.trans_b, g.trans_a, g.n, g.m, g.k, g.ldb, g.lda, g.ldc};
}

/// The iterated matrix: X is m×n with m <= n; trans = the caller's matrix is tall (stores Xᵀ).
struct Shape {
  std::size_t m, n;
  bool trans;
};

inline Shape ns_shape(std::size_t rows, std::size_t cols) {
  return {std::min(rows, cols), std::max(rows, cols), rows > cols};
}

/// X̃ = x·X and R̃ = gram·R (see the header comment); both powers of two in [1, 2^14].
struct Scales {
  double x;
  double gram;
};

inline Scales ns_scales(const Shape& s) {
  auto pow2 = [](double e) { return std::ldexp(1.0, static_cast<int>(std::clamp(e, 0.0, 14.0))); };
  const double md = static_cast<double>(s.m), nd = static_cast<double>(s.n);
  // t ≈ sqrt(mn) makes the RMS entry of X̃ about 1; s ≈ m makes diag(R̃) about 1.
  return {pow2(std::round(0.5 * std::log2(md * nd))), pow2(std::floor(std::log2(md)))};
}

// ---- symmetric products ----------------------------------------------------------------------
// Every m×m product the Gram form forms is symmetric: X Xᵀ, R², P², P²·R and P·Q (polynomials
// in the same R commute). Only the upper block triangle is computed, as one batched GEMM over
// the b(b+1)/2 tiles (I <= J) of a b×b block partition, and the lower triangle is then mirrored
// from the upper one (which also makes the result exactly symmetric). Work: (b+1)/(2b) of a full
// GEMM (62.5% at b = 4). cuBLAS offers no bf16/fp16 SYRK (cublasSyrkEx/CsyrkEx are complex-only;
// Ssyrk/Ssyrkx are fp32 without tensor cores), hence tiles of cublasGemmBatchedEx.

/// Valid block counts: 1 (plain GEMM) or 2, 4, 8 with m a multiple of 8·b, so every tile
/// offset is a multiple of 8 elements (16-byte aligned 16-bit tiles for the tensor-core paths).
inline bool sym_blocks_valid(std::size_t m, int blocks) {
  if (blocks == 1) return true;
  if (blocks != 2 && blocks != 4 && blocks != 8) return false;
  return m % (8 * static_cast<std::size_t>(blocks)) == 0;
}

/// Default: tiles of at least 1024 rows where m allows it (b = 8 from m = 8192, else 4), smaller
/// tiles below that (the GEMMs are short anyway); b = 1 when m is not a multiple of 16.
inline int default_sym_blocks(std::size_t m) {
  if (m >= 8192 && sym_blocks_valid(m, 8)) return 8;
  if (m >= 256 && sym_blocks_valid(m, 4)) return 4;
  if (m >= 128 && sym_blocks_valid(m, 2)) return 2;
  return 1;
}

/// outer: C = X·Xᵀ from an X buffer (k = n); product: C = A·B of two m×m buffers (k = m).
enum class SymKind { outer, product };

/// Element offsets of one tile's A block, B block and C block in their buffers.
struct Tile {
  std::size_t a, b, c;
};

/// One tile GEMM (all tiles share it) and the tiles of the upper block triangle, in the
/// order (0,0), (0,1), ..., (0,b-1), (1,1), ... With blocks = 1: the whole product.
struct SymPlan {
  RowMajorGemm gemm;
  std::vector<Tile> tiles;
};

inline SymPlan sym_plan(SymKind kind, const Shape& s, int blocks) {
  const std::size_t m = s.m, n = s.n, b = static_cast<std::size_t>(blocks), mb = m / b;
  SymPlan p{};
  if (kind == SymKind::product) {
    // C_IJ = A[I-rows, :] · B[:, J-cols]
    p.gemm = {false, false, mb, mb, m, m, m, m};
  } else if (!s.trans) {
    // C_IJ = X_I · X_Jᵀ with X_I the I-th row block of X (mb×n)
    p.gemm = {false, true, mb, mb, n, n, n, m};
  } else {
    // stored Xs = Xᵀ (n×m): C_IJ = Xs[:, I]ᵀ · Xs[:, J]
    p.gemm = {true, false, mb, mb, n, m, m, m};
  }
  for (std::size_t i = 0; i < b; ++i) {
    for (std::size_t j = i; j < b; ++j) {
      Tile t{};
      if (kind == SymKind::product) {
        t.a = i * mb * m;
        t.b = j * mb;
      } else if (!s.trans) {
        t.a = i * mb * n;
        t.b = j * mb * n;
      } else {
        t.a = i * mb;
        t.b = j * mb;
      }
      t.c = i * mb * m + j * mb;
      p.tiles.push_back(t);
    }
  }
  return p;
}

// ---- the op sequence ---------------------------------------------------------------------------

/// Buffers of the workspace: two m×n X buffers, five m×m buffers, kQn (Q in the X type when
/// the Gram matrices are wider: the Q·X̃ operand), and kOut = the caller's output (only ever
/// written by the final GEMM or copy_out).
enum Buffer : int { kX = 0, kXn, kM0, kM1, kM2, kM3, kM4, kQn, kNumBuffers, kOut = kNumBuffers };

inline bool is_x_buffer(int buffer) {
  return buffer == kX || buffer == kXn || buffer == kOut;
}

/// What one call runs (ns_numerics.hpp).
using Numerics = NsNumerics;

/// The rule of ns_numerics.hpp for a plan shape.
inline Numerics ns_numerics(const Shape& s, Dtype storage, NsVariant requested) {
  return cuda::ns_numerics(s.trans ? s.n : s.m, s.trans ? s.m : s.n, storage, requested);
}

inline Dtype buffer_type(const Numerics& n, int buffer) {
  return is_x_buffer(buffer) || buffer == kQn ? n.x : n.gram;
}

/// Whether tile pointer tables built for `a` serve `b` (they depend on the buffer types only).
inline bool same_buffer_types(const Numerics& a, const Numerics& b) {
  return a.x == b.x && a.gram == b.gram;
}

// An executor provides, with every buffer in its type (buffer_type; kOut in the caller's
// storage type) and fp32 accumulation:
//   gemm(const RowMajorGemm&, float alpha, int a, int b, int c)   c = alpha·op(a)·op(b) (beta 0);
//                                                                  a and b share one type, c's
//                                                                  may be wider (X̃X̃ᵀ into fp32)
//   sym(SymKind, float alpha, int a, int b, int c)                 upper block triangle of
//                                                                  alpha·a·bᵀ (outer, a == b)
//                                                                  or alpha·a·b (product)
//   mirror(int c)                                                  c[j][i] = c[i][j] for i < j
//   sym_poly(int r, int r2, int p, float a, float b, float c)     p = a·I + b·r + c·r2, reading
//                                                                  the upper triangles only
//   poly_add(int a_buf, int b_buf, float a, float b)               b_buf += b·a_buf + a·I
//   narrow(int m_buf, int dst)                                     dst (m×m, the X type) = m_buf
//   copy_out(int x_buf)                                            caller's output = x_buf,
//                                                                  converted to its type
// The input is already normalised into kX as X̃ = x_scale · G / (‖G‖_F + eps), in the X type.

/// c = alpha · X Xᵀ (full, direct form).
inline RowMajorGemm outer_gemm(const Shape& s) {
  return s.trans ? RowMajorGemm{true, false, s.m, s.m, s.n, s.m, s.m, s.m}
                 : RowMajorGemm{false, true, s.m, s.m, s.n, s.n, s.n, s.m};
}

/// dst = alpha · P X in the stored orientation (dst = alpha · Xs Pᵀ when trans).
template <class Exec>
void apply_left(Exec& e, const Shape& s, float alpha, int p, int x, int dst) {
  if (!s.trans) {
    e.gemm(dense_gemm(false, false, s.m, s.n, s.m), alpha, p, x, dst);
  } else {
    e.gemm(dense_gemm(false, true, s.n, s.m, s.m), alpha, x, p, dst);
  }
}

/// Whether an executor can narrow an m×m matrix to the X type (only mixed numerics need it:
/// executors that cost or check same-type sequences need not provide narrow()).
template <class Exec, class = void>
struct can_narrow : std::false_type {};
template <class Exec>
struct can_narrow<Exec, std::void_t<decltype(std::declval<Exec&>().narrow(0, 0))>>
    : std::true_type {};

/// The m×m operator `op` applied to X̃ into dst (scaled by alpha), through a copy in the X type
/// when the m×m matrices are wider (cuBLAS multiplies operands of one type).
template <class Exec>
void apply_operator(Exec& e, const Shape& s, const Numerics& num, float alpha, int op, int x,
                    int dst) {
  if (num.gram != num.x) {
    if constexpr (can_narrow<Exec>::value) {
      e.narrow(op, kQn);
      op = kQn;
    } else {
      throw std::logic_error("ns_plan: mixed numerics on an executor without narrow()");
    }
  }
  apply_left(e, s, alpha, op, x, dst);
}

/// Direct form (reference arithmetic): per step Ã = (s/t²)·X̃X̃ᵀ = s·A,
/// B = (c/s²)·Ã² + (b/s)·Ã + a·I, X̃ ← B·X̃; the last step writes (1/t)·B·X̃ to kOut (or,
/// with convert_output, to the free X buffer, which copy_out converts into kOut). With
/// `symmetric`, the two symmetric products (X̃X̃ᵀ and Ã²) are computed on the upper block
/// triangle only (sym) and mirrored: (b+1)/(2b) of their work, the same dot products per
/// element; Ã is mirrored before Ã² reads its rows, B after poly_add (whose lower triangle the
/// mirror then overwrites). Without it: full GEMMs.
template <class Exec>
void run_direct(Exec& e, const Shape& s, const NsConfig& cfg, const Scales& sc,
                const Numerics& num = {NsVariant::direct, Dtype::f32, Dtype::f32},
                bool convert_output = false, bool symmetric = false) {
  const double t = sc.x, g = sc.gram;
  const int a_buf = kM0, b_buf = kM1;
  int x = kX, xn = kXn;
  const int steps = cfg.steps;
  for (int k = 0; k < steps; ++k) {
    const NsCoefficients co = ns_step_coefficients(cfg.coefficients, k);
    const auto outer_alpha = static_cast<float>(g / (t * t));
    const auto square_alpha = static_cast<float>(co.c / (g * g));
    if (symmetric) {
      e.sym(SymKind::outer, outer_alpha, x, x, a_buf);
      e.mirror(a_buf);
      e.sym(SymKind::product, square_alpha, a_buf, a_buf, b_buf);
    } else {
      e.gemm(outer_gemm(s), outer_alpha, x, x, a_buf);
      e.gemm(dense_gemm(false, false, s.m, s.m, s.m), square_alpha, a_buf, a_buf, b_buf);
    }
    e.poly_add(a_buf, b_buf, static_cast<float>(co.a), static_cast<float>(co.b / g));
    if (symmetric) e.mirror(b_buf);
    const bool last = k + 1 == steps;
    const int dst = !last ? xn : (convert_output ? xn : kOut);
    apply_operator(e, s, num, last ? static_cast<float>(1.0 / t) : 1.0f, b_buf, x, dst);
    std::swap(x, xn);
  }
  if (convert_output) e.copy_out(x);
}

/// Gram form (same algebra as kernels/host/newton_schulz.cpp): R̃ = (s/t²)·X̃X̃ᵀ; per step
/// R̃2 = R̃²/s, P = a·I + (b/s)·R̃ + (c/s)·R̃2, R̃ ← P²·R̃ (unless last or restarting next),
/// Q ← P·Q; restart before step kGramRestartStep (X̃ ← Q·X̃, R̃ recomputed, Q ← I);
/// output (1/t)·Q·X̃. Symmetric products by sym() + mirror(); R̃2 needs no mirror (sym_poly
/// reads upper triangles only). With convert_output (the X type differs from the caller's)
/// the product goes to the free X buffer and copy_out() converts it into the caller's output.
template <class Exec>
void run_gram(Exec& e, const Shape& s, const NsConfig& cfg, const Scales& sc,
              const Numerics& num = {NsVariant::gram, Dtype::f32, Dtype::f32},
              bool convert_output = false) {
  const double t = sc.x, g = sc.gram;
  const float outer_alpha = static_cast<float>(g / (t * t));
  const float inv_g = static_cast<float>(1.0 / g);
  int x = kX, xn = kXn;
  int r = kM0, tmp = kM1, p = kM2, q = kM3, u = kM4;
  e.sym(SymKind::outer, outer_alpha, x, x, r);
  e.mirror(r);
  bool q_identity = true;
  const int steps = cfg.steps;
  for (int k = 0; k < steps; ++k) {
    if (k == kGramRestartStep && !q_identity) {
      apply_operator(e, s, num, 1.0f, q, x, xn);
      std::swap(x, xn);
      e.sym(SymKind::outer, outer_alpha, x, x, r);
      e.mirror(r);
      q_identity = true;
    }
    const NsCoefficients co = ns_step_coefficients(cfg.coefficients, k);
    e.sym(SymKind::product, inv_g, r, r, tmp);  // R̃2 = R̃²/s (upper)
    e.sym_poly(r, tmp, p, static_cast<float>(co.a), static_cast<float>(co.b / g),
               static_cast<float>(co.c / g));
    const bool last = k + 1 == steps;
    const bool restart_next = k + 1 == kGramRestartStep;
    if (!last && !restart_next) {
      e.sym(SymKind::product, 1.0f, p, p, tmp);  // T = P²
      e.mirror(tmp);
      e.sym(SymKind::product, 1.0f, tmp, r, u);  // R̃ ← P²·R̃
      e.mirror(u);
      std::swap(r, u);
    }
    if (q_identity) {
      std::swap(q, p);  // Q = P
      q_identity = false;
    } else {
      e.sym(SymKind::product, 1.0f, p, q, tmp);  // Q ← P·Q
      e.mirror(tmp);
      std::swap(q, tmp);
    }
  }
  const int dst = convert_output ? xn : kOut;
  apply_operator(e, s, num, static_cast<float>(1.0 / t), q, x, dst);
  if (convert_output) e.copy_out(dst);
}

/// Gram form with one type throughout (X̃ and the m×m matrices), converted to the caller's
/// type when `convert_output`.
template <class Exec>
void run_gram(Exec& e, const Shape& s, const NsConfig& cfg, const Scales& sc, bool convert_output) {
  run_gram(e, s, cfg, sc, Numerics{NsVariant::gram, Dtype::f32, Dtype::f32}, convert_output);
}

/// The whole call after the normalisation: `num`'s form with its types; the result is
/// converted to `storage` when the X type differs from it.
/// `symmetric_direct`: the direct form's symmetric products on tiles (run_direct).
template <class Exec>
void run(Exec& e, const Shape& s, const NsConfig& cfg, const Scales& sc, const Numerics& num,
         Dtype storage, bool symmetric_direct = false) {
  const bool convert_output = num.x != storage;
  if (num.form == NsVariant::direct) {
    run_direct(e, s, cfg, sc, num, convert_output, symmetric_direct);
  } else {
    run_gram(e, s, cfg, sc, num, convert_output);
  }
}

}  // namespace dmuon::kernels::cuda::plan
