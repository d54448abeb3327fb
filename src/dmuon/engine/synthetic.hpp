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
// k = min(2, E) (top-2 routing, the Mixtral/reference setting).
// Compute::none skips the GEMMs: gradient = u(seed, step, pid, i) + w_i on every rank.

#include <cstdint>
#include <vector>

#include "dmuon/engine/engine_options.hpp"
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

/// Deterministic initial weights of parameter `pid` (same on every rank and in the reference).
void init_weights(std::uint64_t seed, int pid, float* w, std::int64_t numel, std::int64_t cols);

/// Global sample count parameter `pid` of `tree` trains on (see above).
std::int64_t param_samples(const model::ModuleTree& tree, int pid, std::int64_t global_tokens);

/// Per-parameter activations and scratch, sized once for this rank's sample range.
class LinearWork {
 public:
  LinearWork() = default;
  /// Parameter `pid` of `tree`; this rank's share of its global samples among `shard` ranks.
  LinearWork(const model::ModuleTree& tree, int pid, std::int64_t global_tokens, int rank,
             int shard);
  std::int64_t local_samples() const { return end_ - begin_; }
  std::int64_t bytes() const;

  /// Forward: draws X (and T) for `step` and computes Y = X·Wᵀ.
  void forward(Compute compute, std::uint64_t seed, long step, const float* w);
  /// Backward: dY = (G/n)(Y − T), dX = dY·W (discarded), grad = dYᵀ·X (rows x cols); with
  /// Compute::none grad = u + w. `grad` holds numel floats.
  void backward(Compute compute, std::uint64_t seed, long step, const float* w, float* grad);

 private:
  int pid_ = -1;
  MatrixShape shape_{};
  std::int64_t n_ = 0, begin_ = 0, end_ = 0;
  int shard_ = 1;
  std::vector<float> x_, y_, t_, dx_;
};

}  // namespace dmuon::engine
