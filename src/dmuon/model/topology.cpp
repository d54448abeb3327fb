#include "dmuon/model/topology.hpp"

#include <fmt/format.h>

#include <charconv>
#include <stdexcept>

#include "dmuon/base/abbreviate.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/model/builtin_geometry.hpp"

namespace dmuon::model {
namespace {

// Largest value of a size: keeps every weight's numel (a product of at most three dimensions)
// far inside int64. Counts (layers, experts) are capped lower: ModuleTree::add_module scans the
// parent's children for duplicates, so one container must stay small.
constexpr std::int64_t kMaxDim = std::int64_t{1} << 20;
constexpr std::int64_t kMaxCount = 4096;
// A user may ask for absurd layer/expert counts; refuse before memory runs out.
constexpr std::size_t kMaxModules = 2'000'000;

using Dims = std::vector<std::pair<std::string, std::int64_t>>;

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) {
    if (!s.empty()) s += ", ";
    s += x;
  }
  return s;
}

class DimView {
 public:
  explicit DimView(const Dims& d) : d_(d) {}
  std::int64_t operator[](std::string_view key) const {
    for (const auto& [k, v] : d_)
      if (k == key) return v;
    throw std::logic_error(fmt::format("topology builder asked for undefined key '{}'", key));
  }

 private:
  const Dims& d_;
};

// Wraps ModuleTree's builder calls with the module-count guard.
class Builder {
 public:
  Builder(ModuleTree& tree, const std::string& topology) : t_(tree), topology_(topology) {}
  int module(int parent, const std::string& name, const std::string& type) {
    guard();
    return t_.add_module(parent, name, type);
  }
  int linear(int parent, const std::string& name, std::int64_t in, std::int64_t out) {
    guard();
    return t_.add_linear(parent, name, in, out);
  }
  int norm(int parent, const std::string& name, const std::string& type, std::int64_t dim) {
    guard();
    return t_.add_norm(parent, name, type, dim);
  }
  int embedding(int parent, const std::string& name, std::int64_t vocab, std::int64_t dim) {
    const int m = module(parent, name, "Embedding");
    t_.add_parameter(m, "weight", {vocab, dim});
    return m;
  }
  ModuleTree& tree() { return t_; }

 private:
  void guard() {
    if (t_.num_modules() >= kMaxModules)
      throw InputError(fmt::format(
          "topology '{}' with these dimensions exceeds {} modules; reduce the layer or expert "
          "counts",
          topology_, kMaxModules));
  }
  ModuleTree& t_;
  const std::string& topology_;
};

std::string idx(std::int64_t k) {
  return std::to_string(k);
}

// ---- builders (structures as in docs/SPEC.md §3's warnings and the seed note) ---------------

// Llama-style attention: q/o h→h, k/v h→kv (grouped-query), under a module of type `type`.
// q: the query width, heads x head_dim (h for most models; Qwen3-30B-A3B: 2 h).
int add_gqa_attention(Builder& b, int parent, const std::string& type, std::int64_t h,
                      std::int64_t kv, std::int64_t q) {
  const int attn = b.module(parent, "self_attn", type);
  b.linear(attn, "q_proj", h, q);
  b.linear(attn, "k_proj", h, kv);
  b.linear(attn, "v_proj", h, kv);
  b.linear(attn, "o_proj", q, h);
  return attn;
}

// Gated MLP (SwiGLU): gate/up h→i, down i→h, under a module `name` of type `type`.
int add_gated_mlp(Builder& b, int parent, const std::string& name, const std::string& type,
                  std::int64_t h, std::int64_t i) {
  const int mlp = b.module(parent, name, type);
  b.linear(mlp, "gate_proj", h, i);
  b.linear(mlp, "up_proj", h, i);
  b.linear(mlp, "down_proj", i, h);
  return mlp;
}

void build_sequential(Builder& b, const DimView& x) {
  const auto d = x["d"];
  b.linear(ModuleTree::root, "0", d, 4 * d);
  b.module(ModuleTree::root, "1", "GELU");
  b.linear(ModuleTree::root, "2", 4 * d, d);
}

void build_vla(Builder& b, const DimView& x) {
  const auto d = x["d"];
  const int visual = b.module(ModuleTree::root, "visual", "VisionTower");
  const int blocks = b.module(visual, "blocks", "ModuleList");
  for (std::int64_t k = 0; k < x["n_vit"]; ++k) {
    const int blk = b.module(blocks, idx(k), "VitBlock");
    b.norm(blk, "norm1", "LayerNorm", d);
    const int attn = b.module(blk, "attn", "VitAttention");
    b.linear(attn, "qkv", d, 3 * d);
    b.linear(attn, "proj", d, d);
    b.norm(blk, "norm2", "LayerNorm", d);
    const int mlp = b.module(blk, "mlp", "VitMlp");
    b.linear(mlp, "fc1", d, 4 * d);
    b.linear(mlp, "fc2", 4 * d, d);
  }
  const int layers = b.module(ModuleTree::root, "layers", "ModuleList");
  for (std::int64_t k = 0; k < x["n_dec"]; ++k) {
    const int l = b.module(layers, idx(k), "DecoderLayer");
    b.linear(l, "q_proj", d, d);
    b.linear(l, "v_proj", d, d);
    b.linear(l, "o_proj", d, d);
    b.linear(l, "gate_proj", d, 4 * d);
    b.linear(l, "down_proj", 4 * d, d);
  }
  const int head = b.module(ModuleTree::root, "action_head", "ActionHead");
  b.linear(head, "fc1", d, d);
  b.linear(head, "fc2", d, 7);
}

void build_moe(Builder& b, const DimView& x) {
  const auto d = x["d"], d_ff = x["d_ff"], e = x["E"];
  const int layers = b.module(ModuleTree::root, "layers", "ModuleList");
  for (std::int64_t k = 0; k < x["L"]; ++k) {
    const int l = b.module(layers, idx(k), "MoELayer");
    b.linear(l, "router", d, e);
    const int experts = b.module(l, "experts", "ModuleList");
    for (std::int64_t j = 0; j < e; ++j) {
      const int ex = b.module(experts, idx(j), "Expert");
      b.linear(ex, "gate_proj", d, d_ff);
      b.linear(ex, "down_proj", d_ff, d);
    }
    b.linear(l, "o_proj", d, d);
  }
}

void build_nested(Builder& b, const DimView& x) {
  const auto h = x["h"], i = x["i"], kv = x["kv"], v = x["V"], e = x["e"], a = x["a"];
  const int outer = b.module(ModuleTree::root, "layers", "ModuleList");

  const int vlm = b.module(outer, "0", "Qwen2VLModel");
  const int text = b.module(vlm, "model", "Qwen2VLTextModel");
  b.embedding(text, "embed_tokens", v, h);
  const int tl = b.module(text, "layers", "ModuleList");
  for (std::int64_t k = 0; k < x["Ll"]; ++k) {
    const int l = b.module(tl, idx(k), "Qwen2VLDecoderLayer");
    add_gqa_attention(b, l, "Qwen2VLAttention", h, kv, h);
    add_gated_mlp(b, l, "mlp", "Qwen2MLP", h, i);
    b.norm(l, "input_layernorm", "RMSNorm", h);
    b.norm(l, "post_attention_layernorm", "RMSNorm", h);
  }
  b.norm(text, "norm", "RMSNorm", h);
  const int visual = b.module(vlm, "visual", "Qwen2VisionTransformer");
  const int vb = b.module(visual, "blocks", "ModuleList");
  for (std::int64_t k = 0; k < x["Lv"]; ++k) {
    const int blk = b.module(vb, idx(k), "Qwen2VLVisionBlock");
    b.norm(blk, "norm1", "LayerNorm", e);
    b.norm(blk, "norm2", "LayerNorm", e);
    const int attn = b.module(blk, "attn", "VisionAttention");
    b.linear(attn, "qkv", e, 3 * e);
    b.linear(attn, "proj", e, e);
    const int mlp = b.module(blk, "mlp", "VisionMlp");
    b.linear(mlp, "fc1", e, 4 * e);
    b.linear(mlp, "fc2", 4 * e, e);
  }
  b.linear(vlm, "lm_head", h, v);

  const int expert = b.module(outer, "1", "ActionExpert");
  const int el = b.module(expert, "layers", "ModuleList");
  for (std::int64_t k = 0; k < x["La"]; ++k) {
    const int l = b.module(el, idx(k), "ExpertLayer");
    b.linear(l, "q_proj", a, a);
    b.linear(l, "k_proj", a, a);
    b.linear(l, "v_proj", a, a);
    b.linear(l, "o_proj", a, a);
    b.linear(l, "fc1", a, 4 * a);
    b.linear(l, "fc2", 4 * a, a);
  }
}

void build_llm(Builder& b, const DimView& x) {
  const auto h = x["h"], i = x["i"], kv = x["kv"], v = x["V"];
  const int model = b.module(ModuleTree::root, "model", "LlamaModel");
  const int embed = b.embedding(model, "embed_tokens", v, h);
  const int layers = b.module(model, "layers", "ModuleList");
  for (std::int64_t k = 0; k < x["L"]; ++k) {
    const int l = b.module(layers, idx(k), "LlamaDecoderLayer");
    const int attn = add_gqa_attention(b, l, "LlamaAttention", h, kv, h);
    if (x["qkv_bias"]) {
      // Qwen2: q/k/v projections carry a bias (its children: q_proj, k_proj, v_proj, o_proj).
      const std::vector<int> proj = b.tree().module(attn).children;
      const std::int64_t out[] = {h, kv, kv};
      for (std::size_t j = 0; j < 3; ++j) b.tree().add_parameter(proj[j], "bias", {out[j]});
    }
    add_gated_mlp(b, l, "mlp", "LlamaMLP", h, i);
    b.norm(l, "input_layernorm", "LlamaRMSNorm", h);
    b.norm(l, "post_attention_layernorm", "LlamaRMSNorm", h);
  }
  b.norm(model, "norm", "LlamaRMSNorm", h);
  if (x["tie_embeddings"]) {
    const int head = b.module(ModuleTree::root, "lm_head", "Linear");
    b.tree().tie_parameter(head, "weight", b.tree().module(embed).params.front());
  } else {
    b.linear(ModuleTree::root, "lm_head", h, v);
  }
}

void build_moe_llm(Builder& b, const DimView& x) {
  const auto h = x["h"], kv = x["kv"], v = x["V"], n_layers = x["L"], e = x["E"];
  if (x["first_dense"] > n_layers)
    throw InputError(fmt::format("topology 'moe-llm': first_dense={} exceeds L={} (valid: 0..L)",
                                 x["first_dense"], n_layers));
  const int model = b.module(ModuleTree::root, "model", "MoeModel");
  b.embedding(model, "embed_tokens", v, h);
  const int layers = b.module(model, "layers", "ModuleList");
  for (std::int64_t k = 0; k < n_layers; ++k) {
    const int l = b.module(layers, idx(k), "MoeDecoderLayer");
    if (x["mla"]) {
      // DeepSeek-V3 multi-head latent attention: low-rank q and a shared compressed kv.
      const auto heads = x["heads"], nope = x["qk_nope"], rope = x["qk_rope"];
      const int attn = b.module(l, "self_attn", "DeepseekV3Attention");
      b.linear(attn, "q_a_proj", h, x["q_lora"]);
      b.norm(attn, "q_a_layernorm", "RMSNorm", x["q_lora"]);
      b.linear(attn, "q_b_proj", x["q_lora"], heads * (nope + rope));
      b.linear(attn, "kv_a_proj_with_mqa", h, x["kv_lora"] + rope);
      b.norm(attn, "kv_a_layernorm", "RMSNorm", x["kv_lora"]);
      b.linear(attn, "kv_b_proj", x["kv_lora"], heads * (nope + x["v_head"]));
      b.linear(attn, "o_proj", heads * x["v_head"], h);
    } else {
      const int attn = add_gqa_attention(b, l, "MoeAttention", h, kv, x["q"]);
      if (x["qk_norm"]) {
        // Qwen3: one RMSNorm of head_dim applied to every head of q and of k, before RoPE.
        b.norm(attn, "q_norm", "RMSNorm", x["head_dim"]);
        b.norm(attn, "k_norm", "RMSNorm", x["head_dim"]);
      }
    }
    if (k < x["first_dense"]) {
      add_gated_mlp(b, l, "mlp", "MoeMLP", h, x["i_dense"]);
    } else {
      const int mlp = b.module(l, "mlp", "MoeSparseBlock");
      b.linear(mlp, "gate", h, e);
      const int experts = b.module(mlp, "experts", "ModuleList");
      for (std::int64_t j = 0; j < e; ++j)
        add_gated_mlp(b, experts, idx(j), "MoeExpert", h, x["i"]);
      if (x["shared"]) add_gated_mlp(b, mlp, "shared_experts", "MoeExpert", h, x["i_shared"]);
    }
    b.norm(l, "input_layernorm", "RMSNorm", h);
    b.norm(l, "post_attention_layernorm", "RMSNorm", h);
  }
  b.norm(model, "norm", "RMSNorm", h);
  b.linear(ModuleTree::root, "lm_head", h, v);
}

// ---- registry ------------------------------------------------------------------------------

struct Preset {
  std::string name;
  Dims values;  // every key, in key order
};

struct Entry {
  TopologyInfo info;
  std::vector<Preset> presets;
  std::string dedicate, recommended, incomplete;
  void (*build)(Builder&, const DimView&);
  double (*modules)(const DimView&);  // module count (upper bound), checked before building
  ModelGeometry (*geometry)(const builtin::DimLookup&);
};

DimKey size(const char* name, const char* description) {
  return {name, description, 1, kMaxDim};
}
DimKey count(const char* name, const char* description) {
  return {name, description, 1, kMaxCount};
}
DimKey count0(const char* name, const char* description) {
  return {name, description, 0, kMaxCount};
}
DimKey flag(const char* name, const char* description) {
  return {name, description, 0, 1};
}

Entry make(std::string name, std::string description, std::string root_type,
           std::vector<DimKey> keys, std::string layers_alias, std::vector<Preset> presets,
           std::string dedicate, std::string recommended, std::string incomplete,
           void (*build)(Builder&, const DimView&), double (*modules)(const DimView&),
           ModelGeometry (*geometry)(const builtin::DimLookup&)) {
  Entry e;
  e.info.name = std::move(name);
  e.info.description = std::move(description);
  e.info.root_type = std::move(root_type);
  e.info.default_preset = "tiny";
  for (const auto& k : keys) e.info.keys.push_back(k.name);
  e.info.key_info = std::move(keys);
  e.info.layers_alias = std::move(layers_alias);
  for (const auto& p : presets) {
    e.info.presets.push_back(p.name);
    // Presets are written in key order; a mismatch is a bug in this table, caught at startup.
    if (p.values.size() != e.info.keys.size())
      throw std::logic_error("preset " + p.name + " of " + e.info.name + " misses keys");
    for (std::size_t j = 0; j < p.values.size(); ++j)
      if (p.values[j].first != e.info.keys[j])
        throw std::logic_error("preset " + p.name + " of " + e.info.name + " key order");
  }
  e.presets = std::move(presets);
  e.dedicate = std::move(dedicate);
  e.recommended = std::move(recommended);
  e.incomplete = std::move(incomplete);
  e.build = build;
  e.modules = modules;
  e.geometry = geometry;
  return e;
}

// The built-in topologies: one function per family builds its entry (keys, presets, rules),
// registry() lists them in the order --list shows.

// An llm preset, its values in key order.
Preset llm_preset(const char* name, std::int64_t h, std::int64_t i, std::int64_t kv, std::int64_t L,
                  std::int64_t V, std::int64_t tie, std::int64_t bias, std::int64_t head_dim) {
  return Preset{name,
                {{"h", h},
                 {"i", i},
                 {"kv", kv},
                 {"L", L},
                 {"V", V},
                 {"tie_embeddings", tie},
                 {"qkv_bias", bias},
                 {"head_dim", head_dim}}};
}

// A moe-llm preset, its values in key order.
Preset moe_llm_preset(const char* name, std::int64_t h, std::int64_t kv, std::int64_t q,
                      std::int64_t L, std::int64_t V, std::int64_t E, std::int64_t i,
                      std::int64_t shared, std::int64_t i_shared, std::int64_t first_dense,
                      std::int64_t i_dense, std::int64_t mla, std::int64_t q_lora,
                      std::int64_t kv_lora, std::int64_t heads, std::int64_t qk_nope,
                      std::int64_t qk_rope, std::int64_t v_head, std::int64_t head_dim,
                      std::int64_t top_k, std::int64_t router_sigmoid, std::int64_t qk_norm) {
  return Preset{name,
                {{"h", h},
                 {"kv", kv},
                 {"q", q},
                 {"L", L},
                 {"V", V},
                 {"E", E},
                 {"i", i},
                 {"shared", shared},
                 {"i_shared", i_shared},
                 {"first_dense", first_dense},
                 {"i_dense", i_dense},
                 {"mla", mla},
                 {"q_lora", q_lora},
                 {"kv_lora", kv_lora},
                 {"heads", heads},
                 {"qk_nope", qk_nope},
                 {"qk_rope", qk_rope},
                 {"v_head", v_head},
                 {"head_dim", head_dim},
                 {"top_k", top_k},
                 {"router_sigmoid", router_sigmoid},
                 {"qk_norm", qk_norm}}};
}

Entry sequential_entry() {
  return make(
      "sequential", "flat nn.Sequential(Linear d->4d, GELU, Linear 4d->d)", "Sequential",
      {size("d", "model width")}, "", {{"paper", {{"d", 1024}}}, {"tiny", {{"d", 256}}}}, "ndim=2",
      "default", "", build_sequential, [](const DimView&) { return 4.0; },
      builtin::sequential_geometry);
}

Entry vla_entry() {
  return make(
      "vla", "ToyVLA: ViT blocks (blocks.N) + decoder layers (layers.N) + action head", "ToyVLA",
      {size("d", "model width"), count("n_vit", "vision blocks"), count("n_dec", "decoder layers")},
      "n_dec",
      {{"paper", {{"d", 1024}, {"n_vit", 24}, {"n_dec", 28}}},
       {"tiny", {{"d", 128}, {"n_vit", 4}, {"n_dec", 4}}}},
      "ndim=2", "types:VisionTower,DecoderLayer,ActionHead", "types:VisionTower,DecoderLayer",
      build_vla,
      [](const DimView& x) { return 7.0 + 9.0 * double(x["n_vit"]) + 6.0 * double(x["n_dec"]); },
      builtin::vla_geometry);
}

Entry moe_entry() {
  return make(
      "moe", "MoEModel: layers.N of (router, experts.K, o_proj)", "MoEModel",
      {size("d", "model width"), size("d_ff", "expert hidden width"),
       count("E", "experts per layer"), count("L", "MoE layers")},
      "L",
      {{"paper", {{"d", 1024}, {"d_ff", 4096}, {"E", 8}, {"L", 16}}},
       {"tiny", {{"d", 128}, {"d_ff", 256}, {"E", 8}, {"L", 4}}}},
      "ndim=2&excludes:router", "types:Expert,MoELayer", "types:Expert", build_moe,
      [](const DimView& x) { return 2.0 + double(x["L"]) * (4.0 + 3.0 * double(x["E"])); },
      builtin::moe_geometry);
}

Entry nested_entry() {
  return make(
      "nested",
      "VlaPolicy: layers.0 = Qwen2-VL backbone (model.layers.N, visual.blocks.N), layers.1 = "
      "action expert",
      "VlaPolicy",
      {size("h", "text hidden size"), size("i", "text MLP width"),
       size("kv", "k/v projection width"), count("Ll", "text decoder layers"),
       size("V", "vocabulary"), size("e", "vision width"), count("Lv", "vision blocks"),
       size("a", "action expert width"), count("La", "action expert layers"),
       size("head_dim", "text and action-expert attention head width"),
       size("vit_head_dim", "vision attention head width"),
       size("vision_tokens", "vision tokens per sample (image patches)"),
       size("action_tokens", "action tokens per sample (the action chunk)")},
      "Ll",
      {{"paper",
        {{"h", 3584},
         {"i", 18944},
         {"kv", 512},
         {"Ll", 28},
         {"V", 152064},
         {"e", 1280},
         {"Lv", 32},
         {"a", 1024},
         {"La", 6},
         // Qwen2-VL-7B: head_dim 3584 / 28 heads = 128; vision tower 1280 / 16 heads = 80
         // (config.json vision_config); one 224x224 image at patch 14 = 256 patches; an action
         // chunk of 50 steps (pi0's H = 50).
         {"head_dim", 128},
         {"vit_head_dim", 80},
         {"vision_tokens", 256},
         {"action_tokens", 50}}},
       {"tiny",
        {{"h", 128},
         {"i", 256},
         {"kv", 32},
         {"Ll", 4},
         {"V", 1000},
         {"e", 64},
         {"Lv", 4},
         {"a", 64},
         {"La", 2},
         {"head_dim", 32},
         {"vit_head_dim", 16},
         {"vision_tokens", 16},
         {"action_tokens", 4}}}},
      "ndim=2&excludes:embed&excludes:lm_head",
      "types:Qwen2VLDecoderLayer,Qwen2VLVisionBlock,ExpertLayer",
      "types:Qwen2VLDecoderLayer,Qwen2VLVisionBlock", build_nested,
      [](const DimView& x) {
        return 12.0 + 12.0 * double(x["Ll"]) + 9.0 * double(x["Lv"]) + 7.0 * double(x["La"]);
      },
      builtin::nested_geometry);
}

Entry llm_entry() {
  return make(
      "llm", "LlamaForCausalLM: model.layers.N (self_attn, mlp), optional tied lm_head",
      "LlamaForCausalLM",
      {size("h", "hidden size"), size("i", "MLP width"), size("kv", "k/v projection width"),
       count("L", "decoder layers"), size("V", "vocabulary"),
       flag("tie_embeddings", "1: lm_head.weight is model.embed_tokens.weight"),
       flag("qkv_bias", "1: q/k/v projections have biases (Qwen2)"),
       size("head_dim",
            "attention head width (heads = h / head_dim, kv heads = kv / "
            "head_dim)")},
      "L",
      // HF config.json values (hidden_size, intermediate_size, num_key_value_heads x
      // head_dim, num_hidden_layers, vocab_size, tie_word_embeddings; head_dim =
      // hidden_size / num_attention_heads = 128 for all of them):
      //   the reference's published benchmark models: Qwen2.5-1.5B (12 heads, 2 kv),
      //   Llama-3.2-3B (24, 8), Qwen2.5-7B (28, 4), Llama-3.1-8B = llama3-8b (32, 8),
      //   Qwen2.5-14B (40, 8);
      //   the models of the public runs (PUBLIC-THROUGHPUT.md): Llama-3-70B (64, 8),
      //   Llama-3.1-405B (128, 8), Llama-2-13B (40, 40: MHA), Llama-2-70B (64, 8).
      {llm_preset("tiny", 128, 256, 32, 4, 1000, 0, 0, 32),
       llm_preset("mini", 1024, 8192, 256, 4, 32000, 0, 0, 128),
       llm_preset("llama3-8b", 4096, 14336, 1024, 32, 128256, 0, 0, 128),
       llm_preset("qwen2.5-1.5b", 1536, 8960, 256, 28, 151936, 1, 1, 128),
       llm_preset("llama3.2-3b", 3072, 8192, 1024, 28, 128256, 1, 0, 128),
       llm_preset("qwen2.5-7b", 3584, 18944, 512, 28, 152064, 0, 1, 128),
       llm_preset("qwen2.5-14b", 5120, 13824, 1024, 48, 152064, 0, 1, 128),
       llm_preset("llama3-70b", 8192, 28672, 1024, 80, 128256, 0, 0, 128),
       llm_preset("llama3.1-405b", 16384, 53248, 1024, 126, 128256, 0, 0, 128),
       llm_preset("llama2-13b", 5120, 13824, 5120, 40, 32000, 0, 0, 128),
       llm_preset("llama2-70b", 8192, 28672, 1024, 80, 32000, 0, 0, 128)},
      "contains:proj", "types:LlamaDecoderLayer", "types:LlamaAttention", build_llm,
      [](const DimView& x) { return 6.0 + 12.0 * double(x["L"]); }, builtin::llm_geometry);
}

Entry moe_llm_entry() {
  return make(
      "moe-llm",
      "HF-style MoE LLM (Mixtral, DeepSeek-V3): model.layers.N.mlp.experts.K, router "
      "mlp.gate, optional shared expert and leading dense layers",
      "MoeForCausalLM",
      {size("h", "hidden size"),
       size("kv", "k/v projection width (mla=0)"),
       size("q", "query width, heads x head_dim (mla=0; h for Mixtral, 2 h for Qwen3-30B-A3B)"),
       count("L", "decoder layers"),
       size("V", "vocabulary"),
       count("E", "routed experts per MoE layer"),
       size("i", "routed expert width"),
       flag("shared", "1: one shared expert per MoE layer"),
       size("i_shared", "shared expert width"),
       count0("first_dense", "leading dense (non-MoE) layers"),
       size("i_dense", "dense MLP width"),
       flag("mla", "1: DeepSeek-V3 multi-head latent attention"),
       size("q_lora", "MLA q low rank"),
       size("kv_lora", "MLA kv low rank"),
       size("heads", "MLA heads"),
       size("qk_nope", "MLA per-head q/k width without rope"),
       size("qk_rope", "MLA per-head rope width"),
       size("v_head", "MLA per-head v width"),
       size("head_dim", "attention head width (mla=0: heads = h / head_dim)"),
       count("top_k", "routed experts per token (capped at E)"),
       flag("router_sigmoid", "1: sigmoid router scores (DeepSeek-V3); 0: softmax"),
       flag("qk_norm", "1: RMSNorm of head_dim on every q and k head (Qwen3; mla=0)")},
      "L",
      // HF config.json values. Mixtral-8x7B: hidden 4096, 32 heads / 8 kv heads of 128,
      // 32 layers, vocab 32000, num_local_experts 8, intermediate 14336,
      // num_experts_per_tok 2, softmax router. DeepSeek-V3: hidden 7168, 61 layers,
      // first_k_dense_replace 3 (intermediate 18432), n_routed_experts 256 of
      // moe_intermediate_size 2048, n_shared_experts 1, num_experts_per_tok 8,
      // scoring_func sigmoid, MLA: 128 heads, q_lora_rank 1536, kv_lora_rank 512,
      // qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128, vocab 129280.
      // Qwen3-30B-A3B: hidden 2048, 48 layers, 32 heads / 4 kv heads of head_dim 128 (q width
      // 4096 = 2 h), qk-norm, num_experts 128 of moe_intermediate_size 768, top 8, softmax
      // router, no shared expert, every layer sparse (mlp_only_layers []), vocab 151936,
      // untied embeddings.
      {moe_llm_preset("tiny", 128, 32, 128, 4, 1000, 8, 64, 1, 64, 1, 256, 0, 64, 32, 4, 16, 8, 16,
                      32, 2, 0, 0),
       moe_llm_preset("tiny-mla", 128, 32, 128, 4, 1000, 8, 64, 1, 64, 1, 256, 1, 64, 32, 4, 16, 8,
                      16, 32, 2, 0, 0),
       moe_llm_preset("tiny-qk-norm", 128, 32, 256, 4, 1000, 8, 64, 0, 64, 0, 256, 0, 64, 32, 4, 16,
                      8, 16, 32, 2, 0, 1),
       moe_llm_preset("mixtral-8x7b", 4096, 1024, 4096, 32, 32000, 8, 14336, 0, 14336, 0, 14336, 0,
                      1536, 512, 32, 128, 64, 128, 128, 2, 0, 0),
       moe_llm_preset("deepseek-v3", 7168, 1024, 7168, 61, 129280, 256, 2048, 1, 2048, 3, 18432, 1,
                      1536, 512, 128, 128, 64, 128, 128, 8, 1, 0),
       moe_llm_preset("qwen3-30b-a3b", 2048, 512, 4096, 48, 151936, 128, 768, 0, 768, 0, 6144, 0,
                      1536, 512, 32, 128, 64, 128, 128, 8, 0, 1),
       // Kimi K2 (moonshotai/Kimi-K2-Base config.json): DeepSeek-V3's layout with 384 routed
       // experts, 64 heads, one leading dense layer and a 163,840-token vocabulary.
       moe_llm_preset("kimi-k2", 7168, 1024, 7168, 61, 163840, 384, 2048, 1, 2048, 1, 18432, 1,
                      1536, 512, 64, 128, 64, 128, 128, 8, 1, 0)},
      "contains:proj", "types:MoeExpert,MoeDecoderLayer", "types:MoeExpert", build_moe_llm,
      [](const DimView& x) { return 6.0 + double(x["L"]) * (24.0 + 4.0 * double(x["E"])); },
      builtin::moe_llm_geometry);
}

const std::vector<Entry>& registry() {
  static const std::vector<Entry> entries = {sequential_entry(), vla_entry(), moe_entry(),
                                             nested_entry(),     llm_entry(), moe_llm_entry()};
  return entries;
}

const Entry& entry(const std::string& name) {
  std::vector<std::string> names;
  for (const auto& e : registry()) {
    if (e.info.name == name) return e;
    names.push_back(e.info.name);
  }
  throw InputError(
      fmt::format("unknown topology '{}' (valid: {})", abbreviate_value(name), join(names)));
}

std::int64_t parse_value(const Entry& e, const DimKey& key, const std::string& text) {
  std::int64_t v = 0;
  const char* first = text.data();
  const char* last = first + text.size();
  auto [ptr, ec] = std::from_chars(first, last, v);
  if (text.empty() || ec == std::errc::invalid_argument || ptr != last)
    throw InputError(fmt::format("value '{}' for key '{}' of topology '{}' is not an integer", text,
                                 key.name, e.info.name));
  if (ec == std::errc::result_out_of_range || v < key.min || v > key.max)
    throw InputError(
        fmt::format("value '{}' for key '{}' of topology '{}' is out of range "
                    "(valid: {}..{})",
                    text, key.name, e.info.name, key.min, key.max));
  return v;
}

}  // namespace

std::int64_t Topology::dim(const std::string& key) const {
  std::vector<std::string> names;
  for (const auto& [k, v] : dims) {
    if (k == key) return v;
    names.push_back(k);
  }
  throw InputError(fmt::format("topology '{}' has no dimension '{}' (valid: {})", name, key,
                               names.empty() ? std::string("none") : join(names)));
}

const std::vector<TopologyInfo>& builtin_topologies() {
  static const std::vector<TopologyInfo> infos = [] {
    std::vector<TopologyInfo> v;
    for (const auto& e : registry()) v.push_back(e.info);
    return v;
  }();
  return infos;
}

const TopologyInfo& topology_info(const std::string& name) {
  return entry(name).info;
}

std::pair<std::string, std::string> parse_override(const std::string& arg) {
  const auto eq = arg.find('=');
  if (eq == std::string::npos || eq == 0)
    throw InputError(fmt::format("--set '{}' must have the form KEY=VALUE", arg));
  return {arg.substr(0, eq), arg.substr(eq + 1)};
}

Topology build_topology(const std::string& name, const std::string& preset,
                        const std::vector<std::pair<std::string, std::string>>& overrides) {
  const Entry& e = entry(name);
  const Preset* p = nullptr;
  for (const auto& q : e.presets)
    if (q.name == preset) p = &q;
  if (!p)
    throw InputError(fmt::format("unknown preset '{}' for topology '{}' (valid: {})", preset, name,
                                 join(e.info.presets)));

  Dims dims = p->values;
  for (const auto& [raw_key, value] : overrides) {
    const std::string& key =
        raw_key == "layers" && !e.info.layers_alias.empty() ? e.info.layers_alias : raw_key;
    std::size_t j = 0;
    while (j < e.info.keys.size() && e.info.keys[j] != key) ++j;
    if (j == e.info.keys.size()) {
      std::string valid = join(e.info.keys);
      if (!e.info.layers_alias.empty()) valid += ", layers (= " + e.info.layers_alias + ")";
      throw InputError(
          fmt::format("unknown key '{}' for topology '{}' (valid: {})", raw_key, name, valid));
    }
    dims[j].second = parse_value(e, e.info.key_info[j], value);
  }

  Topology t;
  t.name = name;
  t.preset = preset;
  t.tree = ModuleTree(e.info.root_type);
  t.dedicate_rule = e.dedicate;
  t.recommended_boundary = e.recommended;
  t.incomplete_boundary = e.incomplete;
  if (e.modules(DimView(dims)) > double(kMaxModules))
    throw InputError(fmt::format(
        "topology '{}' with these dimensions has more than {} modules; reduce the layer or "
        "expert counts",
        name, kMaxModules));
  const DimView view(dims);
  // The geometry first: a width that head_dim does not divide fails before the tree is built.
  ModelGeometry geometry = e.geometry([&view](std::string_view key) { return view[key]; });
  Builder b(t.tree, name);
  e.build(b, view);
  t.tree.finalize();
  validate_geometry(geometry, t.tree, fmt::format("topology '{}'", name));
  mark_routed_experts(geometry, t.tree);
  t.geometry = std::move(geometry);
  t.dims = std::move(dims);
  return t;
}

}  // namespace dmuon::model
