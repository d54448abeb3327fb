#include "dmuon/model/builtin_geometry.hpp"

#include <fmt/format.h>

#include "dmuon/base/error.hpp"

namespace dmuon::model::builtin {
namespace {

// The toys (sequential, vla, moe) name no head width: 64 when it divides the width (the common
// ViT/GPT choice), else one head of the whole width.
std::int64_t toy_head_dim(std::int64_t width) {
  return width % 64 == 0 ? 64 : width;
}

AttentionGeometry gqa(std::int64_t heads, std::int64_t kv_heads, std::int64_t head_dim, bool causal,
                      bool rope) {
  AttentionGeometry a;
  a.kind = AttentionKind::gqa;
  a.heads = heads;
  a.kv_heads = kv_heads;
  a.head_dim = head_dim;
  a.causal = causal;
  a.rope = rope;
  return a;
}

StackGeometry stack(const char* name, const char* blocks, TokenStream tokens, std::int64_t hidden,
                    NormKind norm, AttentionGeometry attention,
                    std::vector<std::string> attention_modules,
                    std::vector<std::string> mlp_modules, Activation activation) {
  StackGeometry s;
  s.name = name;
  s.blocks = blocks;
  s.tokens = tokens;
  s.hidden = hidden;
  s.norm = norm;
  s.attention = attention;
  s.attention_modules = std::move(attention_modules);
  s.mlp_modules = std::move(mlp_modules);
  s.activation = activation;
  return s;
}

// A HF causal LM's text stack: pre-RMSNorm, GQA causal attention with RoPE, SwiGLU MLP.
// The query width is h unless the model says otherwise (moe-llm's key q).
StackGeometry text_decoder(const char* blocks, std::int64_t h, std::int64_t kv,
                           std::int64_t head_dim, const char* topology, std::int64_t q = 0,
                           const char* q_key = "h") {
  return stack("text", blocks, TokenStream::text, h, NormKind::rms,
               gqa(heads_of(q > 0 ? q : h, head_dim, q_key, topology),
                   heads_of(kv, head_dim, "kv", topology), head_dim, true, true),
               {"self_attn"}, {"mlp"}, Activation::swiglu);
}

void causal_lm_ends(ModelGeometry& g, const std::string& model, const std::string& head) {
  g.embedding = model + ".embed_tokens";
  g.final_norm = model + ".norm";
  g.final_norm_kind = NormKind::rms;
  g.head = head;
}

}  // namespace

std::int64_t heads_of(std::int64_t width, std::int64_t head_dim, const char* width_key,
                      const char* topology) {
  if (head_dim <= 0 || width % head_dim != 0)
    throw InputError(
        fmt::format("topology '{}': {}={} is not a multiple of head_dim={} (set head_dim to a "
                    "divisor of {})",
                    topology, width_key, width, head_dim, width_key));
  return width / head_dim;
}

ModelGeometry sequential_geometry(const DimLookup& d) {
  // Linear d->4d, GELU, Linear 4d->d: one MLP block (the root), no attention, no residual.
  ModelGeometry g;
  auto s =
      stack("mlp", "", TokenStream::text, d("d"), NormKind::none, {}, {}, {""}, Activation::gelu);
  s.single_block = true;
  s.residual = false;
  g.stacks.push_back(std::move(s));
  return g;
}

ModelGeometry vla_geometry(const DimLookup& d) {
  // ToyVLA: a ViT (pre-LayerNorm, bidirectional attention, GELU MLP) over one 224x224 image at
  // patch 14 (256 tokens), a causal decoder without norms (q/v/o and gate->GELU->down), and an
  // action head on one action token per sample.
  const auto w = d("d"), hd = toy_head_dim(w);
  ModelGeometry g;
  g.stacks.push_back(stack("vision", "visual.blocks", TokenStream::vision, w, NormKind::layer,
                           gqa(w / hd, w / hd, hd, false, false), {"attn"}, {"mlp"},
                           Activation::gelu));
  g.stacks.push_back(stack("text", "layers", TokenStream::text, w, NormKind::none,
                           gqa(w / hd, w / hd, hd, true, true), {"q_proj", "v_proj", "o_proj"},
                           {"gate_proj", "down_proj"}, Activation::gelu));
  g.vision_tokens = 256;
  g.action_tokens = 1;
  g.streams = {{"action_head", TokenStream::action}};
  return g;
}

ModelGeometry moe_geometry(const DimLookup& d) {
  // MoEModel: each layer routes its tokens top-2 (the engine's rule, min(2, E)) to experts
  // gate_proj->GELU->down_proj, then o_proj; a residual add; no attention, no norms.
  ModelGeometry g;
  auto s = stack("moe", "layers", TokenStream::text, d("d"), NormKind::none, {}, {}, {""},
                 Activation::gelu);
  MoeGeometry m;
  m.top_k = 2;
  m.router = "router";
  s.moe = m;
  g.stacks.push_back(std::move(s));
  return g;
}

ModelGeometry nested_geometry(const DimLookup& d) {
  // Qwen2-VL backbone (vision tower: pre-LayerNorm, bidirectional attention with 2-D RoPE,
  // (Quick)GELU MLP; text: the Qwen2 decoder) and the action expert (bidirectional attention
  // over the action chunk, GELU MLP, no norms).
  const auto e = d("e"), a = d("a"), hd = d("head_dim"), vhd = d("vit_head_dim");
  ModelGeometry g;
  g.stacks.push_back(
      stack("vision", "layers.0.visual.blocks", TokenStream::vision, e, NormKind::layer,
            gqa(heads_of(e, vhd, "e", "nested"), heads_of(e, vhd, "e", "nested"), vhd, false, true),
            {"attn"}, {"mlp"}, Activation::gelu));
  g.stacks.push_back(text_decoder("layers.0.model.layers", d("h"), d("kv"), hd, "nested"));
  const auto ah = heads_of(a, hd, "a", "nested");
  g.stacks.push_back(stack("action", "layers.1.layers", TokenStream::action, a, NormKind::none,
                           gqa(ah, ah, hd, false, false), {"q_proj", "k_proj", "v_proj", "o_proj"},
                           {"fc1", "fc2"}, Activation::gelu));
  causal_lm_ends(g, "layers.0.model", "layers.0.lm_head");
  g.vision_tokens = d("vision_tokens");
  g.action_tokens = d("action_tokens");
  return g;
}

ModelGeometry llm_geometry(const DimLookup& d) {
  ModelGeometry g;
  g.stacks.push_back(text_decoder("model.layers", d("h"), d("kv"), d("head_dim"), "llm"));
  causal_lm_ends(g, "model", "lm_head");
  return g;
}

ModelGeometry moe_llm_geometry(const DimLookup& d) {
  ModelGeometry g;
  StackGeometry s;
  if (d("mla")) {
    AttentionGeometry a;
    a.kind = AttentionKind::mla;
    a.heads = d("heads");
    a.q_lora = d("q_lora");
    a.kv_lora = d("kv_lora");
    a.qk_nope = d("qk_nope");
    a.qk_rope = d("qk_rope");
    a.v_head = d("v_head");
    s = stack("text", "model.layers", TokenStream::text, d("h"), NormKind::rms, a, {"self_attn"},
              {"mlp"}, Activation::swiglu);
  } else {
    s = text_decoder("model.layers", d("h"), d("kv"), d("head_dim"), "moe-llm", d("q"), "q");
  }
  MoeGeometry m;
  m.top_k = d("top_k");
  m.scoring = d("router_sigmoid") ? RouterScoring::sigmoid : RouterScoring::softmax;
  m.shared = d("shared") ? "shared_experts" : "";
  s.moe = m;
  g.stacks.push_back(std::move(s));
  causal_lm_ends(g, "model", "lm_head");
  return g;
}

}  // namespace dmuon::model::builtin
