#pragma once
// Seconds one rank's device spends on an op of the step work, from the machine model
// (project/machine_model.hpp; docs/STEP-WORK.md §5):
//
//   gemm          ComputeCost::gemm (wave quantization, thin-GEMM and roofline terms), a
//                 float8 Linear's (Op::float8, --compute-dtype fp8) ComputeCost::gemm_fp8; a
//                 batch of b (grouped experts) is one kernel: the GEMM of the b·m stacked rows
//                 (all tiles share the waves), but never faster than reading every member's
//                 operands at the GEMM's memory rate
//   attention     GPU: FlashAttention-style, at the machine's attention efficiency
//                   forward  flops / (peak · attention_efficiency.forward)
//                   backward 1.25 · flops / (peak · attention_efficiency.backward)
//                 (the benchmarks count the backward as 2.5x the forward, our op as 2x); never
//                 faster than its bytes at the memory-bound rate; plus one kernel overhead.
//                 CPU: the unfused decomposition (attention_ops.hpp), each product a batched
//                 GEMM at its full s×s shape and the softmax a memory-bound kernel
//   batched_gemm  the same (batch = sequences × heads)
//   memory        kernels · kernel_overhead + max(bytes / (memory_bandwidth ·
//                 memory_bound_efficiency), vector_flops / fp32 peak)
//   tp_collective the TP group's collective alone on its link (collective_cost.hpp: NCCL's
//                 model, the group's T consecutive ranks), the compute stream waiting for it
//                 (Megatron and torchtitan issue it on the compute stream; async TP's overlap
//                 is not modelled)
//   cp_collective the same on the CP group (a ring permute: a 2-rank exchange, over the
//                 domains the ring crosses); one issued behind an attention sub-call
//                 (GroupCall::behind_attention_flops) costs only what its transfer takes beyond
//                 that sub-call's time
//   every op      at least kernels · launch_us (the host launching back to back)
//
// All compute times × share (compute_share: ranks of a node sharing cores; 1 on GPUs).

#include <vector>

#include "dmuon/project/compute_cost.hpp"
#include "dmuon/project/machine_model.hpp"
#include "dmuon/work/op.hpp"
#include "kernels/dtype.hpp"

namespace dmuon::project {

class OpTime {
 public:
  /// `dtype`: the compute dtype the step's GEMMs and attention run in. A GPU machine without
  /// attention efficiencies is accepted; costing an attention op on it is an InputError naming
  /// the key.
  OpTime(const Machine& machine, kernels::Dtype dtype, double share = 1.0);

  double seconds(const work::Op& op) const;
  double seconds(const std::vector<work::Op>& ops) const;

 private:
  double gemm(const work::Op& op) const;
  double attention(const work::Op& op) const;
  double memory(double bytes, double vector_flops, int kernels) const;
  double launch_floor(double seconds, int kernels) const;
  double collective(const work::Op& op) const;

  const Machine& m_;
  ComputeCost cost_;
  kernels::Dtype dtype_;
  double share_;
};

}  // namespace dmuon::project
