#pragma once
// The activation work of a step (activation_work.hpp) on the host, run for its cost: GEMMs
// (recomputed linears, the attention core's products) through the one host GEMM
// (kernels::host::gemm) at their shapes, the attention core unfused as the host runs it
// (work/attention_ops.hpp: Q·Kᵀ, softmax, P·V and their backward, s×s scores materialized),
// memory-bound ops (norms, activations, RoPE, residuals, embedding, loss, routing, softmax) as
// their exact bytes of streaming traffic (kernels::host::stream). Inputs are scratch and no
// output is read: the parameters' gradients come from their synthetic Linears (--check is
// unchanged), the phases' times include this work.

#include <cstdint>
#include <functional>
#include <vector>

#include "dmuon/engine/step/activation_work.hpp"

namespace dmuon::engine {

class HostActivation {
 public:
  /// Sizes the scratch for the largest op; InputError when that exceeds what a host run
  /// should allocate (naming the op and the size).
  explicit HostActivation(const ActivationWork& work);

  /// Runs `ops` in order; `between` is called between kernels (MPI progress).
  void run(const std::vector<work::Op>& ops, const std::function<void()>& between);
  std::int64_t bytes() const { return static_cast<std::int64_t>(scratch_.size() * sizeof(float)); }

 private:
  void run_one(const work::Op& op, const std::function<void()>& between);
  void gemm(const work::GemmShape& g, const std::function<void()>& between);

  std::vector<float> scratch_;
};

}  // namespace dmuon::engine
