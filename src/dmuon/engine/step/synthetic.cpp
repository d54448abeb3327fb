#include "dmuon/engine/step/synthetic.hpp"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "dmuon/comm/hash.hpp"

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

constexpr std::uint64_t kStreamX = synthetic_stream::x, kStreamT = synthetic_stream::target,
                        kStreamNone = synthetic_stream::none, kStreamInit = synthetic_stream::init;

}  // namespace

MatrixShape matrix_shape(const model::Parameter& p) {
  const std::int64_t n = p.numel();
  if (p.ndim() >= 2 && p.shape[0] > 0) return {p.shape[0], n / p.shape[0]};
  return {1, n};
}

void synthetic_fill_row(std::uint64_t seed, std::uint64_t step, std::uint64_t sample,
                        std::uint64_t pid, std::uint64_t stream, float* out, std::int64_t n) {
  fill_row(row_key(seed, step, sample, pid, stream), out, n);
}

float synthetic_uniform(std::uint64_t seed, std::uint64_t step, std::uint64_t sample,
                        std::uint64_t pid, std::uint64_t stream, std::uint64_t index) {
  return to_uniform(splitmix64(row_key(seed, step, sample, pid, stream) + index));
}

void init_weights(std::uint64_t seed, std::uint64_t pid, float* w, std::int64_t numel,
                  std::int64_t cols) {
  fill_row(row_key(seed, 0, 0, pid, kStreamInit), w, numel);
  const float s = 1.0f / std::sqrt(static_cast<float>(std::max<std::int64_t>(cols, 1)));
  for (std::int64_t i = 0; i < numel; ++i) w[i] *= s;
}

std::uint64_t expert_data_key(std::string_view global_name) {
  return comm::fnv1a_64(global_name, comm::kFnv1aOffset) | (std::uint64_t{1} << 63);
}

std::int64_t param_samples(const model::ModuleTree& tree, int pid, std::int64_t global_tokens) {
  static constexpr std::string_view kExperts = ".experts.";
  const std::string& name = tree.parameter(pid).name;
  const auto at = name.find(kExperts);
  if (at == std::string::npos) return global_tokens;
  const auto container =
      tree.find_module(std::string_view(name).substr(0, at + kExperts.size() - 1));
  if (!container) return global_tokens;
  // Under --ep the container holds this rank's 1/ep_size of them (expert_local_tree.hpp).
  const auto experts = static_cast<std::int64_t>(tree.module(*container).children.size()) *
                       tree.module(*container).ep_size;
  if (experts < 1) return global_tokens;
  // The model's routing (geometry.hpp: DeepSeek-V3 8 of 256, Mixtral 2 of 8), else top-2.
  const int routed = tree.module(*container).routed_top_k;
  const std::int64_t top_k = std::min<std::int64_t>(routed > 0 ? routed : 2, experts);
  return std::max<std::int64_t>(1, global_tokens * top_k / experts);
}

SampleRange sample_range(const model::ModuleTree& tree, int pid, std::int64_t global_tokens,
                         int rank, int ranks) {
  SampleRange r;
  r.n = param_samples(tree, pid, global_tokens);
  r.begin = r.n * rank / ranks;
  r.end = r.n * (rank + 1) / ranks;
  return r;
}

}  // namespace dmuon::engine
