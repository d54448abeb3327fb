#pragma once
// The run shape the step's activation work depends on: tokens per micro-batch, the compute
// dtype, the activation-checkpointing policy and whether memory-bound ops run as fused kernels
// or as PyTorch eager decompositions (docs/STEP-WORK.md).

#include <cstdint>
#include <string_view>
#include <vector>

#include "dmuon/work/ep_routing.hpp"
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

/// Tensor parallelism as the step work sees it (--tp T, dmuon_project: docs/STEP-WORK.md
/// "Tensor parallelism"). The work is one TP rank's: the topology it is built from is the TP
/// rank's (plan/tp_local_tree.hpp: sharded linears with their local shapes). A block whose
/// attention (MLP) linears are TP-sharded, column-parallel in and row-parallel out, runs 1/T of
/// the heads (hidden units) and its TP collectives in the compute stream: without
/// `sequence`, Megatron's all-reduces (forward after the out projection, backward before the
/// in projections); with `sequence` (--sequence-parallel, torchtitan's and Megatron's sequence
/// parallelism), the norms, residuals and embedding run on 1/T of the tokens, and an all-gather
/// enters and a reduce-scatter leaves each region (backward: the other way round).
struct TensorParallel {
  int size = 1;           ///< T
  bool sequence = false;  ///< sequence parallelism
  /// Per parameter id: -1 not TP-sharded, 0 column-parallel, 1 row-parallel
  /// (boundary/tp_shard.hpp); empty with size 1.
  std::vector<int> sharded_dim;
  int dim(int param) const {
    return param >= 0 && static_cast<std::size_t>(param) < sharded_dim.size()
               ? sharded_dim[static_cast<std::size_t>(param)]
               : -1;
  }
};

/// Context parallelism as the step work sees it (--cp C, dmuon_project: docs/STEP-WORK.md
/// "Context parallelism"), PyTorch's (torch.distributed.tensor.experimental context_parallel,
/// torchtitan's --parallelism.context_parallel_degree) with its defaults: every sequence split
/// into 2C chunks, rank r holding chunks r and 2C−1−r (the causal load balance), so every op
/// but the attention core runs on seq/C tokens; the attention is a ring of C sub-calls per
/// layer over the key/value chunks, gathered with one all-gather (the rotate method
/// "allgather"), their outputs merged in fp32; its backward gathers K and V again and passes
/// the fp32 dK, dV accumulators round the ring (C permutes).
struct ContextParallel {
  int size = 1;  ///< C
};

/// Expert parallelism as the step work sees it (--ep E, docs/STEP-WORK.md "Expert
/// parallelism"), torchtitan's: each MoE layer's experts split over the E ranks of an EP
/// group, E_l = experts / E on each. After routing, every rank sends each routed token copy to
/// the rank of its expert (an all-to-all of the tokens, after one of the per-expert counts),
/// permutes what it receives into its experts' order, runs its E_l experts on them, and sends
/// the outputs back (the combine's all-to-all); backward the other way round. Routing is taken
/// as balanced (each expert receives the mean, as NVIDIA's force-balanced runs), so a rank's
/// expert rows equal its own routed rows. `dispatcher` deepep sends a token once per rank its
/// experts are on instead (ep_routing.hpp), so `routing` sets its bytes.
struct ExpertParallel {
  int size = 1;  ///< E
  EpDispatcher dispatcher = EpDispatcher::all_to_all;
  ExpertRouting routing = ExpertRouting::uniform;
};

struct RunShape {
  std::int64_t seq_len = 0;                     ///< text tokens per sample
  std::int64_t micro_batch = 1;                 ///< samples per micro-batch on one rank
  kernels::Dtype dtype = kernels::Dtype::bf16;  ///< activations and GEMMs
  AcPolicy ac = AcPolicy::none;
  Fusion fusion = Fusion::fused;
  /// torchtitan's float8 Linears (--compute-dtype fp8, work/float8.hpp); `dtype` is then the
  /// type of everything else (bf16).
  bool float8 = false;
  TensorParallel tp;
  ContextParallel cp;
  ExpertParallel ep;

  /// Tokens of one sequence on this rank: seq_len / C.
  std::int64_t local_seq_len() const { return seq_len / cp.size; }
  double element_bytes() const { return static_cast<double>(kernels::dtype_bytes(dtype)); }
};

/// InputError (one line) unless seq_len >= 1 and micro_batch >= 1 (and their product fits),
/// and a TP size of 1..boundary::kMaxTp (sequence parallelism with one above 1 that divides
/// the rank's seq_len / C), a CP size of 1..kMaxCp whose 2C chunks divide seq_len, an EP
/// size of 1..kMaxEp.
void validate_run_shape(const RunShape& s);

/// The largest --cp accepted (the public runs use up to 8).
inline constexpr int kMaxCp = 64;
/// The largest --ep accepted (DeepSeek-V3's 256 experts over 256 ranks).
inline constexpr int kMaxEp = 256;

}  // namespace dmuon::work
