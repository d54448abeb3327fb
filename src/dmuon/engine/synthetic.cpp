#include "dmuon/engine/synthetic.hpp"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "kernels/linear.hpp"

namespace dmuon::engine {
namespace {

inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline std::uint64_t row_key(std::uint64_t seed, std::uint64_t step, std::uint64_t sample,
                             std::uint64_t pid, std::uint64_t stream) {
  std::uint64_t h = splitmix64(seed);
  h = splitmix64(h ^ step);
  h = splitmix64(h ^ pid);
  h = splitmix64(h ^ stream);
  return splitmix64(h ^ sample);
}

inline float to_uniform(std::uint64_t bits) {
  // 24 random mantissa bits -> exact float in [-1, 1).
  return static_cast<float>(static_cast<std::int64_t>(bits >> 40)) * (1.0f / 8388608.0f) - 1.0f;
}

void fill_row(std::uint64_t key, float* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i)
    out[i] = to_uniform(splitmix64(key + static_cast<std::uint64_t>(i)));
}

constexpr std::uint64_t kStreamX = 1, kStreamT = 2, kStreamNone = 3, kStreamInit = 4;

}  // namespace

MatrixShape matrix_shape(const model::Parameter& p) {
  const std::int64_t n = p.numel();
  if (p.ndim() >= 2 && p.shape[0] > 0) return {p.shape[0], n / p.shape[0]};
  return {1, n};
}

float synthetic_uniform(std::uint64_t seed, std::uint64_t step, std::uint64_t sample,
                        std::uint64_t pid, std::uint64_t stream, std::uint64_t index) {
  return to_uniform(splitmix64(row_key(seed, step, sample, pid, stream) + index));
}

void init_weights(std::uint64_t seed, int pid, float* w, std::int64_t numel, std::int64_t cols) {
  fill_row(row_key(seed, 0, 0, static_cast<std::uint64_t>(pid), kStreamInit), w, numel);
  const float s = 1.0f / std::sqrt(static_cast<float>(std::max<std::int64_t>(cols, 1)));
  for (std::int64_t i = 0; i < numel; ++i) w[i] *= s;
}

std::int64_t param_samples(const model::ModuleTree& tree, int pid, std::int64_t global_tokens) {
  static constexpr std::string_view kExperts = ".experts.";
  const std::string& name = tree.parameter(pid).name;
  const auto at = name.find(kExperts);
  if (at == std::string::npos) return global_tokens;
  const auto container =
      tree.find_module(std::string_view(name).substr(0, at + kExperts.size() - 1));
  if (!container) return global_tokens;
  const auto experts = static_cast<std::int64_t>(tree.module(*container).children.size());
  if (experts < 1) return global_tokens;
  const std::int64_t top_k = std::min<std::int64_t>(2, experts);
  return std::max<std::int64_t>(1, global_tokens * top_k / experts);
}

LinearWork::LinearWork(const model::ModuleTree& tree, int pid, std::int64_t global_tokens, int rank,
                       int shard)
    : pid_(pid),
      shape_(matrix_shape(tree.parameter(pid))),
      n_(param_samples(tree, pid, global_tokens)),
      shard_(shard) {
  begin_ = n_ * rank / shard;
  end_ = n_ * (rank + 1) / shard;
  const auto b = static_cast<std::size_t>(end_ - begin_);
  x_.resize(b * static_cast<std::size_t>(shape_.cols));
  y_.resize(b * static_cast<std::size_t>(shape_.rows));
  t_.resize(b * static_cast<std::size_t>(shape_.rows));
  dx_.resize(b * static_cast<std::size_t>(shape_.cols));
}

std::int64_t LinearWork::bytes() const {
  return static_cast<std::int64_t>(4 * (x_.size() + y_.size() + t_.size() + dx_.size()));
}

void LinearWork::forward(Compute compute, std::uint64_t seed, long step, const float* w) {
  const std::int64_t b = local_samples();
  if (compute == Compute::none || b == 0 || shape_.cols == 0) return;
  const auto pid = static_cast<std::uint64_t>(pid_);
  const auto st = static_cast<std::uint64_t>(step);
  for (std::int64_t s = 0; s < b; ++s) {
    const auto gs = static_cast<std::uint64_t>(begin_ + s);
    fill_row(row_key(seed, st, gs, pid, kStreamX), x_.data() + s * shape_.cols, shape_.cols);
    fill_row(row_key(seed, st, gs, pid, kStreamT), t_.data() + s * shape_.rows, shape_.rows);
  }
  kernels::host::linear_forward(x_.data(), w, y_.data(), static_cast<std::size_t>(b),
                                static_cast<std::size_t>(shape_.cols),
                                static_cast<std::size_t>(shape_.rows));
}

void LinearWork::backward(Compute compute, std::uint64_t seed, long step, const float* w,
                          float* grad) {
  const std::int64_t numel = shape_.rows * shape_.cols;
  if (compute == Compute::none) {
    const std::uint64_t key = row_key(seed, static_cast<std::uint64_t>(step), 0,
                                      static_cast<std::uint64_t>(pid_), kStreamNone);
    fill_row(key, grad, numel);
    for (std::int64_t i = 0; i < numel; ++i) grad[i] += w[i];
    return;
  }
  const std::int64_t b = local_samples();
  if (b == 0 || numel == 0) {
    std::fill(grad, grad + numel, 0.0f);
    return;
  }
  const float scale = static_cast<float>(shard_) / static_cast<float>(n_);
  for (std::size_t i = 0; i < y_.size(); ++i) y_[i] = (y_[i] - t_[i]) * scale;  // y_ becomes dY
  const auto ub = static_cast<std::size_t>(b);
  const auto in = static_cast<std::size_t>(shape_.cols),
             out = static_cast<std::size_t>(shape_.rows);
  kernels::host::linear_backward_input(y_.data(), w, dx_.data(), ub, in, out);
  kernels::host::linear_backward_weight(y_.data(), x_.data(), grad, ub, in, out, false);
}

}  // namespace dmuon::engine
