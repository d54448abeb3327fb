#pragma once
// The run shape the step's activation work depends on: tokens per micro-batch, the compute
// dtype, the activation-checkpointing policy and whether memory-bound ops run as fused kernels
// or as PyTorch eager decompositions (docs/STEP-WORK.md).

#include <cstdint>
#include <string_view>

#include "kernels/dtype.hpp"

namespace dmuon::work {

/// Activation checkpointing (recompute before a block's backward):
///   none            nothing recomputed
///   selective       torchtitan's per-op SAC ("op"): every op of a block is recomputed except
///                   every odd-numbered matmul (1st, 3rd, ... in forward order) and the attention
///                   core, whose outputs are saved
///   selective-layer torchtitan's per-layer SAC ("2"): every second block (the 2nd, 4th, ...)
///                   fully recomputed
///   full            every block's forward recomputed before its backward
///   core-attn       Megatron's selective recompute: the attention core only
enum class AcPolicy { none, selective, selective_layer, full, core_attn };
const char* ac_policy_name(AcPolicy p);
/// Parses the names above; InputError listing them otherwise.
AcPolicy parse_ac_policy(std::string_view s);

/// Memory-bound ops (norms, activations, RoPE, cross-entropy): one fused kernel each (Triton /
/// torch.compile / Liger style), or the eager PyTorch decomposition of the reference models
/// (torchtitan's RMSNorm in fp32, complex RoPE, fp32 cross-entropy; several kernels each).
enum class Fusion { fused, eager };
const char* fusion_name(Fusion f);
Fusion parse_fusion(std::string_view s);

struct RunShape {
  std::int64_t seq_len = 0;                     ///< text tokens per sample
  std::int64_t micro_batch = 1;                 ///< samples per micro-batch on one rank
  kernels::Dtype dtype = kernels::Dtype::bf16;  ///< activations and GEMMs
  AcPolicy ac = AcPolicy::none;
  Fusion fusion = Fusion::fused;
  /// torchtitan's float8 Linears (--compute-dtype fp8, work/float8.hpp); `dtype` is then the
  /// type of everything else (bf16).
  bool float8 = false;

  double element_bytes() const { return static_cast<double>(kernels::dtype_bytes(dtype)); }
};

/// InputError (one line) unless seq_len >= 1 and micro_batch >= 1 (and their product fits).
void validate_run_shape(const RunShape& s);

}  // namespace dmuon::work
