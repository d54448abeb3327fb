#include "dmuon/work/flop_convention.hpp"

#include <fmt/format.h>

#include "dmuon/base/error.hpp"
#include "dmuon/work/parameter_tokens.hpp"
#include "dmuon/work/unit_builder.hpp"

namespace dmuon::work {
namespace {

bool embedding_module(const model::ModuleTree& tree, int m) {
  return tree.module(m).type.find("Embedding") != std::string::npos;
}

// Σ over attention layers of 6·heads·(qk + v)·S per text token (non-causal, causal-halved).
std::pair<double, double> attention_term(const model::Topology& t, std::int64_t seq_len) {
  double full = 0, causal = 0;
  for (const auto& s : t.geometry->stacks) {
    const auto& a = s.attention;
    if (a.kind == model::AttentionKind::none) continue;
    const auto blocks = model::stack_blocks(s, t.tree);
    const double S = stream_tokens_per_sample(t, blocks.front(), seq_len);
    const double per_text_token = S / static_cast<double>(seq_len);
    const double layer = 6.0 * static_cast<double>(a.heads) *
                         static_cast<double>(a.qk_dim() + a.v_dim()) * S * per_text_token;
    const double n = static_cast<double>(blocks.size());
    full += n * layer;
    causal += n * layer * (a.causal ? 0.5 : 1.0);
  }
  return {full, causal};
}

}  // namespace

const char* flop_convention_name(FlopConvention c) {
  switch (c) {
    case FlopConvention::six_n: return "6n";
    case FlopConvention::six_n_attn: return "6n-attn";
    case FlopConvention::megatron: return "megatron";
    case FlopConvention::megatron_causal: return "megatron-causal";
  }
  return "?";
}

FlopConvention parse_flop_convention(std::string_view s) {
  for (auto c : {FlopConvention::six_n, FlopConvention::six_n_attn, FlopConvention::megatron,
                 FlopConvention::megatron_causal})
    if (s == flop_convention_name(c)) return c;
  throw InputError(fmt::format(
      "unknown FLOP convention '{}' (valid: 6n, 6n-attn, megatron, megatron-causal)", s));
}

double ModelFlops::of(FlopConvention c) const {
  if (c == FlopConvention::six_n) return six_n;
  if (!has_geometry)
    throw InputError(fmt::format(
        "FLOP convention '{}' counts attention, but topology '{}' has no geometry (heads, head "
        "widths); valid without one: 6n",
        flop_convention_name(c), topology));
  if (c == FlopConvention::six_n_attn) return six_n_attn;
  return c == FlopConvention::megatron ? megatron : megatron_causal;
}

ModelFlops model_flops_per_token(const model::Topology& t, std::int64_t seq_len) {
  if (seq_len < 1)
    throw InputError(fmt::format("sequence length {} is invalid (must be >= 1)", seq_len));
  const auto& tree = t.tree;
  const double seq = static_cast<double>(seq_len);
  ModelFlops f;
  f.topology = t.name;
  for (int p : tree.parameter_order()) {
    const auto& param = tree.parameter(p);
    const int holder = param.holders.front().module;
    const double n =
        static_cast<double>(param.numel()) * module_tokens_per_sample(t, holder, seq_len) / seq;
    f.params_all += n;
    // The input embedding's table is a lookup, not a GEMM, unless the head shares it.
    if (!(embedding_module(tree, holder) && !param.tied())) f.params_no_embedding += n;
  }
  for (int m : tree.preorder()) {
    if (embedding_module(tree, m)) continue;
    if (const auto l = detail::linear_of(tree, m))
      f.linear_weights += static_cast<double>(l->in) * static_cast<double>(l->out) *
                          module_tokens_per_sample(t, m, seq_len) / seq;
  }
  f.six_n = 6 * f.params_all;
  if (!t.geometry) return f;
  f.has_geometry = true;
  std::tie(f.attention, f.attention_causal) = attention_term(t, seq_len);
  f.six_n_attn = 6 * f.params_no_embedding + f.attention;
  f.megatron = 6 * f.linear_weights + f.attention;
  f.megatron_causal = 6 * f.linear_weights + f.attention_causal;
  return f;
}

}  // namespace dmuon::work
