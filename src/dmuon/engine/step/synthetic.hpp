#pragma once
// Synthetic training data and per-parameter compute, shared by the distributed engine and the
// one-process --check reference so both do the same math.
//
// Every parameter is viewed as a Linear weight W of rows x cols (rows = shape[0], cols = the
// rest; 1-D and 0-D parameters are 1 x numel). Each parameter gets its OWN synthetic input
// (layers are not chained): for global sample s, x_s (cols) and target t_s (rows) come from a
// counter-based RNG keyed by (seed, step, s, parameter id), so any rank count sees the same
// global batch. Loss per sample 0.5·‖W x_s − t_s‖²; the global gradient is the MEAN over the
// n global samples. Rank r of G takes samples [r·n/G, (r+1)·n/G) and contributes
// (G/n)·Σ_local (W x_s − t_s) x_sᵀ, so reduce(AVG) over G ranks yields exactly that mean for
// any split. A routed expert (a parameter under `<path>.experts.<j>`) sees
// n = global_tokens·k/E samples, at least 1: E = the children of `<path>.experts` in the tree,
// k = min(top-k, E) with the model's top-k (ModuleTree::Module::routed_top_k, from its
// geometry: DeepSeek-V3 8, Mixtral 2), else min(2, E) (top-2 routing, the reference setting).
// Compute::none skips the GEMMs: gradient = u(seed, step, pid, i) + w_i on every rank.
//
// This file is the data only (no compute, no Kokkos): the host computes with LinearWork
// (linear_work.hpp), the CUDA backend with kernels::cuda::synthetic_rows and cuBLAS.

#include <algorithm>
#include <cstdint>
#include <string_view>

#include "dmuon/engine/step/engine_options.hpp"
#include "dmuon/model/module_tree.hpp"

namespace dmuon::engine {

/// Matrix view of one parameter.
struct MatrixShape {
  std::int64_t rows = 1;
  std::int64_t cols = 0;
};
MatrixShape matrix_shape(const model::Parameter& p);

/// Uniform in [-1, 1) from a 4-part counter key (splitmix64 mixing).
float synthetic_uniform(std::uint64_t seed, std::uint64_t step, std::uint64_t sample,
                        std::uint64_t pid, std::uint64_t stream, std::uint64_t index);

/// out[i] = synthetic_uniform(seed, step, sample, pid, stream, i) for i < n (one data row).
void synthetic_fill_row(std::uint64_t seed, std::uint64_t step, std::uint64_t sample,
                        std::uint64_t pid, std::uint64_t stream, float* out, std::int64_t n);

/// The synthetic-data key of TP shard `tp_rank` of parameter `pid`: every TP shard is its own
/// synthetic Linear of the local shape (its own inputs, targets and initial weights).
inline std::uint64_t tp_shard_key(int pid, int tp_rank) {
  return static_cast<std::uint64_t>(pid) + (static_cast<std::uint64_t>(tp_rank + 1) << 40);
}

/// The synthetic-data key of a routed expert's parameter under --ep, from its name in the
/// full model (model/expert_local_tree.hpp): the same on the EP rank holding it and in the
/// one-process reference of the full model, whose parameter ids differ (bit 63 set: never
/// a parameter id or a TP shard's key).
std::uint64_t expert_data_key(std::string_view global_name);

/// Deterministic initial weights of parameter `pid` (same on every rank and in the reference);
/// `pid` is the data key (a tensor-parallel shard's own key, tp_shard_key).
void init_weights(std::uint64_t seed, std::uint64_t pid, float* w, std::int64_t numel,
                  std::int64_t cols);

/// Global sample count parameter `pid` of `tree` trains on (see above).
std::int64_t param_samples(const model::ModuleTree& tree, int pid, std::int64_t global_tokens);

/// The smallest global batch with which every parameter the predicate accepts trains on at
/// least min(rows, cols) samples, so its gradient can have full rank. Below it Newton–Schulz
/// amplifies rounding in the near-null directions (a 16-bit --check then needs it).
template <class Accept>
std::int64_t full_rank_global_tokens(const model::ModuleTree& tree, Accept&& accept);

/// The RNG streams of the synthetic data (the last key part of synthetic_uniform).
namespace synthetic_stream {
inline constexpr std::uint64_t x = 1, target = 2, none = 3, init = 4;
}

/// Rank `rank` of `ranks` trains parameter `pid` on global samples [begin, end) of n.
struct SampleRange {
  std::int64_t n = 0, begin = 0, end = 0;
  std::int64_t local() const { return end - begin; }
};
SampleRange sample_range(const model::ModuleTree& tree, int pid, std::int64_t global_tokens,
                         int rank, int ranks);

template <class Accept>
std::int64_t full_rank_global_tokens(const model::ModuleTree& tree, Accept&& accept) {
  std::int64_t need = 1;
  for (int pid : tree.parameter_order()) {
    if (!accept(pid)) continue;
    const auto shape = matrix_shape(tree.parameter(pid));
    const std::int64_t rank = std::min(shape.rows, shape.cols);
    if (param_samples(tree, pid, need) >= rank) continue;
    // param_samples grows with the global batch: double, then bisect.
    std::int64_t lo = need, hi = need;
    while (param_samples(tree, pid, hi) < rank) {
      if (hi > (std::int64_t{1} << 40)) return hi;  // unreachable for any real shape
      lo = hi;
      hi *= 2;
    }
    while (lo + 1 < hi) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      (param_samples(tree, pid, mid) >= rank ? hi : lo) = mid;
    }
    need = hi;
  }
  return need;
}

}  // namespace dmuon::engine
