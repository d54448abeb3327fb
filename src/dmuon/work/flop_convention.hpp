#pragma once
// Model FLOPs per (text) token the way the field reports them (PUBLIC-THROUGHPUT.md §0;
// docs/STEP-WORK.md §4), as a function of the module tree and its geometry. With w_p the tokens
// parameter p processes per text token (1 for text; k/E for a routed expert; vision or action
// tokens per sample / seq_len for those streams) and A the attention term
// A = Σ_attention layers 6·heads·(qk_dim + v_dim)·S·(S_stream / seq_len), S the layer's
// sequence (its stream's tokens per sample):
//
//   6n               6·Σ_p w_p·numel_p over every parameter (embedding and untied head
//                    included; DMuon's bench_tp_llm.py)
//   6n-attn          6·Σ_p w_p·numel_p without the input embedding's table (unless tied to the
//                    head) + A (torchtitan; default)
//   megatron         6·Σ_linears w·numel(weight) (every GEMM weight: projections, MLP, router,
//                    logits; no embedding lookup, norms or biases) + A (Megatron-LM <= 0.11,
//                    NeMo 24.07: non-causal)
//   megatron-causal  the same with A halved in causal layers (Megatron >= 0.12, Megatron-Bridge,
//                    NeMo AutoModel)
//
// megatron-causal equals the step work's matmul FLOPs (forward + backward, no recompute) per
// text token: two independent computations of one number, which the tests compare.

#include <cstdint>
#include <string>
#include <string_view>

#include "dmuon/model/topology.hpp"

namespace dmuon::work {

enum class FlopConvention { six_n, six_n_attn, megatron, megatron_causal };
/// "6n" | "6n-attn" | "megatron" | "megatron-causal".
const char* flop_convention_name(FlopConvention c);
FlopConvention parse_flop_convention(std::string_view s);

struct ModelFlops {
  std::string topology;
  bool has_geometry = false;  ///< false: only 6n is defined
  double six_n = 0, six_n_attn = 0, megatron = 0, megatron_causal = 0;
  /// The parts: parameter terms and the attention term (non-causal, causal).
  double params_all = 0, params_no_embedding = 0, linear_weights = 0;
  double attention = 0, attention_causal = 0;

  /// FLOPs per token under `c`; InputError for an attention convention without a geometry.
  double of(FlopConvention c) const;
};

/// Model FLOPs per text token at `seq_len` text tokens per sample (InputError when < 1).
ModelFlops model_flops_per_token(const model::Topology& t, std::int64_t seq_len);

}  // namespace dmuon::work
