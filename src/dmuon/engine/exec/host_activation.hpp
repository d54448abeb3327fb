#pragma once
// The activation work of a step (activation_work.hpp) on the host, run for its cost: GEMMs
// (recomputed linears, the attention core's products) through the one host GEMM
// (kernels::host::gemm) at their shapes, the attention core unfused as the host runs it
// (work/attention_ops.hpp: Q·Kᵀ, softmax, P·V and their backward, s×s scores materialized),
// memory-bound ops (norms, activations, RoPE, residuals, embedding, loss, routing, softmax) as
// their exact bytes of streaming traffic (kernels::host::stream), the EP ops' token exchanges
// as MPI all-to-alls of their bytes over the EP group (token_exchange). Inputs are scratch
// and no output is read: the parameters' gradients come from their synthetic Linears (--check
// is unchanged), the phases' times include this work.

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "dmuon/comm/communicator.hpp"
#include "dmuon/engine/step/activation_work.hpp"

namespace dmuon::engine {

class HostActivation {
 public:
  /// Sizes the scratch for the largest op; InputError when that exceeds what a host run
  /// should allocate (naming the op and the size).
  /// `ep`: the EP group's communicator (CommGroup::ep), needed when `work` has EP ops.
  HostActivation(const ActivationWork& work, comm::Communicator* ep);

  /// Runs `ops` in order; `between` is called between kernels (MPI progress).
  void run(const std::vector<work::Op>& ops, const std::function<void()>& between);
  std::int64_t bytes() const { return static_cast<std::int64_t>(scratch_.size() * sizeof(float)); }
  /// Milliseconds in the EP all-to-alls since the last call.
  double take_exchange_ms() { return std::exchange(exchange_ms_, 0.0); }

 private:
  void run_one(const work::Op& op, const std::function<void()>& between);
  void gemm(const work::GemmShape& g, const std::function<void()>& between);
  void exchange(const work::Op& op);

  std::vector<float> scratch_;
  comm::Communicator* ep_ = nullptr;
  double exchange_ms_ = 0;
};

}  // namespace dmuon::engine
