#pragma once
// The host's synthetic per-parameter compute (see synthetic.hpp for the data): one Linear
// layer per parameter, its activations owned by Kokkos Views (behind a pointer, so this header
// needs no Kokkos), GEMMs through the host kernels. Shared by the host backend and the
// one-process --check reference, so both do the same math.

#include <cstdint>
#include <functional>
#include <memory>

#include "dmuon/engine/step/engine_options.hpp"
#include "dmuon/engine/step/synthetic.hpp"
#include "dmuon/model/module_tree.hpp"

namespace dmuon::engine {

/// Per-parameter activations and scratch, sized once for this rank's sample range.
class LinearWork {
 public:
  /// Parameter `pid` of `tree`; this rank's share of its global samples among `ranks` ranks,
  /// in `accum` micro-batches (accumulation.hpp). Requires an initialised Kokkos.
  /// `key` keys the synthetic data (default: the parameter id; a tensor-parallel shard has its
  /// own, tp_shard_key). `compute` none (the run's, or a looked-up table's:
  /// StepSpec::compute_of): no GEMM runs, so no activation buffers are allocated.
  /// `in_flight`: micro-batches whose forward may run before the backward of the first
  /// (--pp's 1F1B, in_flight_micro_batches): each keeps its own activations, micro-batch j in
  /// slot j mod in_flight.
  LinearWork(const model::ModuleTree& tree, int pid, std::int64_t global_tokens, int rank,
             int ranks, int accum = 1, std::uint64_t key = kPidKey, Compute compute = Compute::gemm,
             int in_flight = 1);
  static constexpr std::uint64_t kPidKey = ~std::uint64_t{0};
  ~LinearWork();
  LinearWork(LinearWork&&) noexcept;
  LinearWork& operator=(LinearWork&&) noexcept;

  /// This rank's samples of the current micro-batch.
  std::int64_t local_samples() const { return range_.local(); }
  /// Selects micro-batch `micro` (0..accum−1) for the next forward/backward.
  void set_micro(int micro);
  std::int64_t bytes() const;

  /// Called between the kernels of one forward/backward: the host engine drives MPI progress
  /// there, since nonblocking collectives only move inside MPI calls.
  using Between = std::function<void()>;

  /// Forward: draws X (and T) for `step` and computes Y = X·Wᵀ.
  void forward(Compute compute, std::uint64_t seed, long step, const float* w,
               const Between& between = {});
  /// Backward: dY = (G/n)(Y − T), dX = dY·W (discarded), grad = dYᵀ·X (rows x cols); with
  /// Compute::none grad = (u + w)/accum. `grad` holds numel floats; `accumulate` adds to it.
  void backward(Compute compute, std::uint64_t seed, long step, const float* w, float* grad,
                const Between& between = {}, bool accumulate = false);

 private:
  struct Buffers;
  int pid_ = -1;
  std::uint64_t key_ = 0;
  MatrixShape shape_{};
  SampleRange range_{};  // the current micro-batch's
  std::int64_t n_ = 0;   // samples per step
  int rank_ = 0;
  int ranks_ = 1;
  int accum_ = 1;
  std::unique_ptr<Buffers> buf_;  // the slots' activations
  int slot_ = 0;                  // the current micro-batch's
};

}  // namespace dmuon::engine
