#pragma once
// Test oracles: naive double-precision references and LAPACK SVDs. Plain loops are fine here:
// these are small and independent of the production GEMM path.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

namespace dmuon::kernels::testing {

using MatD = std::vector<double>;  // row-major

inline std::vector<float> random_matrix(std::size_t rows, std::size_t cols, unsigned seed,
                                        float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> out(rows * cols);
  for (auto& v : out) v = dist(gen);
  return out;
}

/// c (m×n) = a (m×k) · b (k×n), row-major, double.
inline MatD matmul(const MatD& a, const MatD& b, std::size_t m, std::size_t k, std::size_t n) {
  MatD c(m * n, 0.0);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t p = 0; p < k; ++p)
      for (std::size_t j = 0; j < n; ++j) c[i * n + j] += a[i * k + p] * b[p * n + j];
  return c;
}

inline MatD transpose(const MatD& a, std::size_t rows, std::size_t cols) {
  MatD t(rows * cols);
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) t[j * rows + i] = a[i * cols + j];
  return t;
}

template <class T>
std::vector<float> transpose_f(const std::vector<T>& a, std::size_t rows, std::size_t cols) {
  std::vector<float> t(rows * cols);
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) t[j * rows + i] = static_cast<float>(a[i * cols + j]);
  return t;
}

template <class T>
MatD to_double(const std::vector<T>& a) {
  return MatD(a.begin(), a.end());
}

/// ‖a − b‖_F / ‖b‖_F
template <class A, class B>
double rel_diff(const A& a, const B& b) {
  double num = 0.0, den = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    num += d * d;
    den += static_cast<double>(b[i]) * static_cast<double>(b[i]);
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

/// Naive double Newton–Schulz (direct form, explicit transpose) for the optimizer oracles.
inline MatD ns_reference(MatD x, std::size_t rows, std::size_t cols,
                         const std::vector<std::array<double, 3>>& coeffs, double eps = 1e-7) {
  const bool tall = rows > cols;
  std::size_t m = rows, n = cols;
  if (tall) {
    x = transpose(x, rows, cols);
    std::swap(m, n);
  }
  double ss = 0.0;
  for (double v : x) ss += v * v;
  const double denom = std::sqrt(ss) + eps;
  for (double& v : x) v /= denom;
  for (const auto& c : coeffs) {
    const MatD a = matmul(x, transpose(x, m, n), m, n, m);
    const MatD a2 = matmul(a, a, m, m, m);
    MatD b(m * m);
    for (std::size_t i = 0; i < m * m; ++i) b[i] = c[1] * a[i] + c[2] * a2[i];
    const MatD bx = matmul(b, x, m, m, n);
    for (std::size_t i = 0; i < m * n; ++i) x[i] = c[0] * x[i] + bx[i];
  }
  return tall ? transpose(x, m, n) : x;
}

}  // namespace dmuon::kernels::testing
