// Built-in topologies: hand-derived structure facts per preset, ties, --set overrides and every
// error path of the registry. Counts are derived in the comments from the structures in the
// brief (docs/SPEC.md §3's warnings), not from the builder code.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "dmuon/base/error.hpp"
#include "dmuon/model/topology.hpp"

namespace dmuon::model {
namespace {

using Shape = std::vector<std::int64_t>;

struct Counts {
  std::size_t mat = 0;             // 2-D parameters (tied counted once)
  std::size_t vec = 0;             // 1-D parameters
  std::size_t dedicated_proj = 0;  // 2-D whose canonical name contains "proj"
};

Counts count(const ModuleTree& t) {
  Counts c;
  for (int id : t.parameter_order()) {
    const auto& p = t.parameter(id);
    if (p.ndim() == 2) ++c.mat;
    if (p.ndim() == 1) ++c.vec;
    if (p.ndim() == 2 && p.name.find("proj") != std::string::npos) ++c.dedicated_proj;
  }
  return c;
}

Shape shape_of(const Topology& t, const std::string& name) {
  auto id = t.tree.find_parameter(name);
  if (!id) {
    ADD_FAILURE() << "no parameter " << name << " in " << t.name << "/" << t.preset;
    return {};
  }
  return t.tree.parameter(*id).shape;
}

std::string type_of(const Topology& t, const std::string& path) {
  auto id = t.tree.find_module(path);
  if (!id) {
    ADD_FAILURE() << "no module " << path << " in " << t.name << "/" << t.preset;
    return {};
  }
  return t.tree.module(*id).type;
}

// Runs `f`, expects an InputError whose one-line message contains every needle.
template <class F>
void expect_input_error(F&& f, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "no InputError thrown";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << msg << " / " << n;
  }
}

TEST(Registry, NamesPresetsKeys) {
  const auto& infos = builtin_topologies();
  std::vector<std::string> names;
  for (const auto& i : infos) names.push_back(i.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"sequential", "vla", "moe", "nested", "llm", "moe-llm"}));
  for (const auto& i : infos) {
    EXPECT_EQ(i.default_preset, "tiny") << i.name;
    EXPECT_EQ(i.keys.size(), i.key_info.size());
    // Every preset builds, finalized, with dims in key order and the info's root type.
    for (const auto& p : i.presets) {
      const auto t = build_topology(i.name, p);
      EXPECT_TRUE(t.tree.finalized());
      EXPECT_EQ(t.tree.module(ModuleTree::root).type, i.root_type);
      ASSERT_EQ(t.dims.size(), i.keys.size());
      for (std::size_t k = 0; k < i.keys.size(); ++k) EXPECT_EQ(t.dims[k].first, i.keys[k]);
      EXPECT_FALSE(t.dedicate_rule.empty());
      EXPECT_FALSE(t.recommended_boundary.empty());
      // Every Linear holds a 2-D "weight"; only Qwen2's q/k/v projections (qkv_bias) add a
      // 1-D "bias".
      const bool biased = i.name == "llm" && p.rfind("qwen", 0) == 0;
      for (const auto& m : t.tree.modules())
        if (m.type == "Linear") {
          const bool qkv = m.name == "q_proj" || m.name == "k_proj" || m.name == "v_proj";
          ASSERT_EQ(m.params.size(), biased && qkv ? 2u : 1u) << m.path;
          EXPECT_EQ(t.tree.parameter(m.params[0]).ndim(), 2) << m.path;
        }
    }
  }
  EXPECT_EQ(topology_info("vla").keys, (std::vector<std::string>{"d", "n_vit", "n_dec"}));
  EXPECT_EQ(topology_info("llm").presets,
            (std::vector<std::string>{"tiny", "mini", "llama3-8b", "qwen2.5-1.5b", "llama3.2-3b",
                                      "qwen2.5-7b", "qwen2.5-14b", "llama3-70b", "llama3.1-405b",
                                      "llama2-13b", "llama2-70b"}));
}

TEST(Sequential, TinyAndPaper) {
  const auto t = build_topology("sequential");  // d = 256
  EXPECT_EQ(t.tree.num_modules(), 4u);          // root, 0, 1 (GELU), 2
  EXPECT_EQ(t.tree.num_parameters(), 2u);
  EXPECT_EQ(type_of(t, ""), "Sequential");
  EXPECT_EQ(type_of(t, "1"), "GELU");
  EXPECT_TRUE(t.tree.module(*t.tree.find_module("1")).params.empty());
  EXPECT_EQ(shape_of(t, "0.weight"), (Shape{1024, 256}));
  EXPECT_EQ(shape_of(t, "2.weight"), (Shape{256, 1024}));
  EXPECT_EQ(t.dedicate_rule, "ndim=2");
  EXPECT_EQ(t.recommended_boundary, "default");
  EXPECT_EQ(t.incomplete_boundary, "");
  EXPECT_EQ(shape_of(build_topology("sequential", "paper"), "0.weight"), (Shape{4096, 1024}));
}

TEST(Vla, Tiny) {
  const auto t = build_topology("vla");  // d 128, n_vit 4, n_dec 4
  // Modules: root, visual, visual.blocks, 4 x (block, norm1, attn, qkv, proj, norm2, mlp, fc1,
  // fc2 = 9), layers, 4 x (layer + 5 Linear = 6), action_head + 2 Linear = 3.
  EXPECT_EQ(t.tree.num_modules(), 1u + 1 + 1 + 4 * 9 + 1 + 4 * 6 + 3);  // 67
  const auto c = count(t.tree);
  EXPECT_EQ(c.mat, 4u * 4 + 4 * 5 + 2);  // 38
  EXPECT_EQ(c.vec, 8u);                  // norm1, norm2 per block
  EXPECT_EQ(shape_of(t, "visual.blocks.0.attn.qkv.weight"), (Shape{384, 128}));
  EXPECT_EQ(shape_of(t, "visual.blocks.3.norm2.weight"), (Shape{128}));
  EXPECT_EQ(shape_of(t, "layers.3.down_proj.weight"), (Shape{128, 512}));
  EXPECT_EQ(shape_of(t, "layers.0.gate_proj.weight"), (Shape{512, 128}));
  EXPECT_EQ(shape_of(t, "action_head.fc2.weight"), (Shape{7, 128}));
  EXPECT_EQ(type_of(t, "visual"), "VisionTower");
  EXPECT_EQ(type_of(t, "visual.blocks"), "ModuleList");
  EXPECT_EQ(type_of(t, "visual.blocks.2"), "VitBlock");
  EXPECT_EQ(type_of(t, "visual.blocks.2.attn"), "VitAttention");
  EXPECT_EQ(type_of(t, "visual.blocks.2.mlp"), "VitMlp");
  EXPECT_EQ(type_of(t, "visual.blocks.2.norm1"), "LayerNorm");
  EXPECT_EQ(type_of(t, "layers.1"), "DecoderLayer");
  EXPECT_EQ(type_of(t, "action_head"), "ActionHead");
  // Numel: block = 2*128 + 384*128 + 128*128 + 2*512*128 = 196864; decoder layer = 3*128*128 +
  // 2*512*128 = 180224; head = 128*128 + 7*128 = 17280.
  EXPECT_EQ(t.tree.total_numel(), 4 * 196864 + 4 * 180224 + 17280);
  EXPECT_EQ(t.recommended_boundary, "types:VisionTower,DecoderLayer,ActionHead");
  EXPECT_EQ(t.incomplete_boundary, "types:VisionTower,DecoderLayer");
  EXPECT_EQ(t.dedicate_rule, "ndim=2");
  // Registration pre-order: first parameter is the first block's norm1.
  EXPECT_EQ(t.tree.parameter(t.tree.parameter_order().front()).name,
            "visual.blocks.0.norm1.weight");
  EXPECT_EQ(t.tree.parameter(t.tree.parameter_order().back()).name, "action_head.fc2.weight");
}

TEST(Vla, Paper) {
  const auto t = build_topology("vla", "paper");
  EXPECT_EQ(count(t.tree).mat, 24u * 4 + 28 * 5 + 2);
  EXPECT_EQ(shape_of(t, "layers.27.down_proj.weight"), (Shape{1024, 4096}));
}

TEST(Moe, Tiny) {
  const auto t = build_topology("moe");  // d 128, d_ff 256, E 8, L 4
  // root, layers, 4 x (layer, router, experts, 8 x (expert + 2 Linear), o_proj = 28)
  EXPECT_EQ(t.tree.num_modules(), 2u + 4 * 28);
  EXPECT_EQ(count(t.tree).mat, 4u * (1 + 8 * 2 + 1));  // 72
  EXPECT_EQ(count(t.tree).vec, 0u);
  EXPECT_EQ(shape_of(t, "layers.2.router.weight"), (Shape{8, 128}));
  EXPECT_EQ(shape_of(t, "layers.0.experts.7.down_proj.weight"), (Shape{128, 256}));
  EXPECT_EQ(shape_of(t, "layers.0.experts.7.gate_proj.weight"), (Shape{256, 128}));
  EXPECT_EQ(type_of(t, "layers.0"), "MoELayer");
  EXPECT_EQ(type_of(t, "layers.0.experts"), "ModuleList");
  EXPECT_EQ(type_of(t, "layers.0.experts.3"), "Expert");
  EXPECT_EQ(t.dedicate_rule, "ndim=2&excludes:router");
  EXPECT_EQ(t.recommended_boundary, "types:Expert,MoELayer");
  EXPECT_EQ(t.incomplete_boundary, "types:Expert");
  // Attribute order inside a layer: router, experts.*, o_proj.
  const auto& l0 = t.tree.module(*t.tree.find_module("layers.0"));
  ASSERT_EQ(l0.children.size(), 3u);
  EXPECT_EQ(t.tree.module(l0.children[0]).name, "router");
  EXPECT_EQ(t.tree.module(l0.children[2]).name, "o_proj");
  EXPECT_EQ(count(build_topology("moe", "paper").tree).mat, 16u * 18);
}

TEST(Nested, Tiny) {
  const auto t = build_topology("nested");
  // 2-D: embed + 4 x 7 + lm_head + 4 x 4 (vision) + 2 x 6 (action expert) = 58.
  EXPECT_EQ(count(t.tree).mat, 1u + 28 + 1 + 16 + 12);
  // 1-D: 4 x 2 (text norms) + final norm + 4 x 2 (vision norms) = 17.
  EXPECT_EQ(count(t.tree).vec, 17u);
  // root, layers, layers.0, model, embed, model.layers, 4 x 12, norm, visual, blocks, 4 x 9,
  // lm_head, layers.1, layers.1.layers, 2 x 7.
  EXPECT_EQ(t.tree.num_modules(), 6u + 48 + 3 + 36 + 3 + 14);
  EXPECT_EQ(shape_of(t, "layers.0.model.embed_tokens.weight"), (Shape{1000, 128}));
  EXPECT_EQ(shape_of(t, "layers.0.lm_head.weight"), (Shape{1000, 128}));
  EXPECT_EQ(shape_of(t, "layers.0.model.layers.3.self_attn.k_proj.weight"), (Shape{32, 128}));
  EXPECT_EQ(shape_of(t, "layers.0.model.layers.3.mlp.down_proj.weight"), (Shape{128, 256}));
  EXPECT_EQ(shape_of(t, "layers.0.visual.blocks.1.attn.qkv.weight"), (Shape{192, 64}));
  EXPECT_EQ(shape_of(t, "layers.0.visual.blocks.1.mlp.fc1.weight"), (Shape{256, 64}));
  EXPECT_EQ(shape_of(t, "layers.1.layers.1.fc2.weight"), (Shape{64, 256}));
  EXPECT_EQ(type_of(t, "layers"), "ModuleList");
  EXPECT_EQ(type_of(t, "layers.0"), "Qwen2VLModel");
  EXPECT_EQ(type_of(t, "layers.0.model"), "Qwen2VLTextModel");
  EXPECT_EQ(type_of(t, "layers.0.model.embed_tokens"), "Embedding");
  EXPECT_EQ(type_of(t, "layers.0.model.layers.0"), "Qwen2VLDecoderLayer");
  EXPECT_EQ(type_of(t, "layers.0.model.layers.0.self_attn"), "Qwen2VLAttention");
  EXPECT_EQ(type_of(t, "layers.0.model.layers.0.mlp"), "Qwen2MLP");
  EXPECT_EQ(type_of(t, "layers.0.model.norm"), "RMSNorm");
  EXPECT_EQ(type_of(t, "layers.0.visual"), "Qwen2VisionTransformer");
  EXPECT_EQ(type_of(t, "layers.0.visual.blocks.0"), "Qwen2VLVisionBlock");
  EXPECT_EQ(type_of(t, "layers.0.visual.blocks.0.attn"), "VisionAttention");
  EXPECT_EQ(type_of(t, "layers.0.visual.blocks.0.mlp"), "VisionMlp");
  EXPECT_EQ(type_of(t, "layers.1"), "ActionExpert");
  EXPECT_EQ(type_of(t, "layers.1.layers.0"), "ExpertLayer");
  EXPECT_EQ(t.dedicate_rule, "ndim=2&excludes:embed&excludes:lm_head");
  EXPECT_EQ(t.recommended_boundary, "types:Qwen2VLDecoderLayer,Qwen2VLVisionBlock,ExpertLayer");
  EXPECT_EQ(t.incomplete_boundary, "types:Qwen2VLDecoderLayer,Qwen2VLVisionBlock");
}

TEST(Nested, PaperIsQwen2Vl7bShapes) {
  const auto t = build_topology("nested", "paper");
  EXPECT_EQ(shape_of(t, "layers.0.model.embed_tokens.weight"), (Shape{152064, 3584}));
  EXPECT_EQ(shape_of(t, "layers.0.model.layers.27.self_attn.k_proj.weight"), (Shape{512, 3584}));
  EXPECT_EQ(shape_of(t, "layers.0.model.layers.0.mlp.gate_proj.weight"), (Shape{18944, 3584}));
  EXPECT_EQ(shape_of(t, "layers.0.visual.blocks.31.attn.qkv.weight"), (Shape{3840, 1280}));
  EXPECT_EQ(shape_of(t, "layers.0.visual.blocks.0.mlp.fc2.weight"), (Shape{1280, 5120}));
  EXPECT_EQ(shape_of(t, "layers.1.layers.5.fc1.weight"), (Shape{4096, 1024}));
  EXPECT_EQ(count(t.tree).mat, 1u + 28 * 7 + 1 + 32 * 4 + 6 * 6);
}

TEST(Llm, Tiny) {
  const auto t = build_topology("llm");
  // root, model, embed_tokens, layers, 4 x (layer, self_attn, 4 proj, mlp, 3 proj, 2 norms),
  // norm, lm_head.
  EXPECT_EQ(t.tree.num_modules(), 4u + 4 * 12 + 2);
  EXPECT_EQ(count(t.tree).mat, 1u + 4 * 7 + 1);  // 30
  EXPECT_EQ(count(t.tree).vec, 4u * 2 + 1);      // 9
  EXPECT_EQ(count(t.tree).dedicated_proj, 28u);
  EXPECT_EQ(shape_of(t, "model.layers.0.self_attn.k_proj.weight"), (Shape{32, 128}));
  EXPECT_EQ(shape_of(t, "model.layers.3.mlp.up_proj.weight"), (Shape{256, 128}));
  EXPECT_EQ(shape_of(t, "lm_head.weight"), (Shape{1000, 128}));
  EXPECT_EQ(type_of(t, "model"), "LlamaModel");
  EXPECT_EQ(type_of(t, "model.layers.2"), "LlamaDecoderLayer");
  EXPECT_EQ(type_of(t, "model.layers.2.self_attn"), "LlamaAttention");
  EXPECT_EQ(type_of(t, "model.layers.2.mlp"), "LlamaMLP");
  EXPECT_EQ(type_of(t, "model.layers.2.input_layernorm"), "LlamaRMSNorm");
  EXPECT_EQ(type_of(t, "model.norm"), "LlamaRMSNorm");
  EXPECT_EQ(type_of(t, "lm_head"), "Linear");
  EXPECT_EQ(t.dedicate_rule, "contains:proj");
  EXPECT_EQ(t.recommended_boundary, "types:LlamaDecoderLayer");
  EXPECT_EQ(t.incomplete_boundary, "types:LlamaAttention");
  for (const auto& p : t.tree.parameters()) EXPECT_FALSE(p.tied()) << p.name;
}

TEST(Llm, TiedEmbeddings) {
  const auto t = build_topology("llm", "tiny", {{"tie_embeddings", "1"}});
  EXPECT_EQ(t.dim("tie_embeddings"), 1);
  EXPECT_EQ(t.tree.num_modules(), 4u + 4 * 12 + 2);  // lm_head module still exists
  EXPECT_EQ(t.tree.num_parameters(), 38u);           // one object for both names
  auto id = t.tree.find_parameter("model.embed_tokens.weight");
  ASSERT_TRUE(id);
  const auto& p = t.tree.parameter(*id);
  EXPECT_TRUE(p.tied());
  ASSERT_EQ(p.holders.size(), 2u);
  EXPECT_EQ(t.tree.holder_name(p.holders[0]), "model.embed_tokens.weight");  // canonical
  EXPECT_EQ(t.tree.holder_name(p.holders[1]), "lm_head.weight");
  EXPECT_FALSE(t.tree.find_parameter("lm_head.weight"));  // not a canonical name
  const auto& head = t.tree.module(*t.tree.find_module("lm_head"));
  ASSERT_EQ(head.params.size(), 1u);
  EXPECT_EQ(head.params[0], *id);
  // Tied counted once: total = untied total - V*h.
  EXPECT_EQ(t.tree.total_numel(), build_topology("llm").tree.total_numel() - 1000 * 128);
}

TEST(Llm, MiniAndLlama3) {
  const auto mini = build_topology("llm", "mini");  // SPEC §5 vector
  EXPECT_EQ(shape_of(mini, "model.layers.0.self_attn.k_proj.weight"), (Shape{256, 1024}));
  EXPECT_EQ(shape_of(mini, "model.layers.0.self_attn.v_proj.weight"), (Shape{256, 1024}));
  EXPECT_EQ(shape_of(mini, "model.layers.3.mlp.down_proj.weight"), (Shape{1024, 8192}));
  EXPECT_EQ(count(mini.tree).dedicated_proj, 4u * 7);
  const auto l3 = build_topology("llm", "llama3-8b");
  EXPECT_EQ(count(l3.tree).mat, 32u * 7 + 2);
  EXPECT_EQ(shape_of(l3, "model.embed_tokens.weight"), (Shape{128256, 4096}));
  EXPECT_EQ(shape_of(l3, "model.layers.31.self_attn.k_proj.weight"), (Shape{1024, 4096}));
  EXPECT_EQ(shape_of(l3, "model.layers.31.mlp.gate_proj.weight"), (Shape{14336, 4096}));
  // Llama-3-8B has 8.03e9 parameters: 32 x (2*4096^2 + 2*1024*4096 + 3*14336*4096 + 2*4096)
  // + 2*128256*4096 + 4096.
  EXPECT_EQ(l3.tree.total_numel(), 8030261248);
  // The reference's other published benchmark models: every parameter count is the model
  // card's (Hugging Face safetensors totals), from embeddings (tied in Qwen2.5-1.5B and
  // Llama-3.2-3B), q/k/v biases (Qwen2.5) and head dim 128 GQA.
  EXPECT_EQ(build_topology("llm", "qwen2.5-1.5b").tree.total_numel(), 1543714304);
  EXPECT_EQ(build_topology("llm", "llama3.2-3b").tree.total_numel(), 3212749824);
  EXPECT_EQ(build_topology("llm", "qwen2.5-7b").tree.total_numel(), 7615616512);
  EXPECT_EQ(build_topology("llm", "qwen2.5-14b").tree.total_numel(), 14770033664);
  const auto q7 = build_topology("llm", "qwen2.5-7b");
  EXPECT_EQ(shape_of(q7, "model.layers.0.self_attn.k_proj.bias"), (Shape{512}));
  EXPECT_EQ(shape_of(q7, "model.layers.27.self_attn.q_proj.bias"), (Shape{3584}));
  EXPECT_FALSE(l3.tree.find_parameter("model.layers.0.self_attn.q_proj.bias").has_value());
}

TEST(MoeLlm, Tiny) {
  const auto t = build_topology("moe-llm");
  // Layer 0 dense (attn 4 + mlp 3), layers 1..3 MoE (attn 4 + gate + 8 x 3 + shared 3 = 32).
  EXPECT_EQ(count(t.tree).mat, 1u + 7 + 3 * 32 + 1);  // 105
  EXPECT_EQ(count(t.tree).vec, 4u * 2 + 1);
  EXPECT_EQ(count(t.tree).dedicated_proj, 7u + 3 * 31);  // gate, embed, lm_head excluded
  // root, model, embed, layers, norm, lm_head; dense layer 12; MoE layer 1 + attn 5 + mlp 1 +
  // gate 1 + experts 1 + 8 x 4 + shared 4 + norms 2 = 47.
  EXPECT_EQ(t.tree.num_modules(), 6u + 12 + 3 * 47);
  EXPECT_EQ(type_of(t, "model.layers.0.mlp"), "MoeMLP");
  EXPECT_EQ(type_of(t, "model.layers.1.mlp"), "MoeSparseBlock");
  EXPECT_EQ(type_of(t, "model.layers.1.mlp.gate"), "Linear");
  EXPECT_EQ(type_of(t, "model.layers.1.mlp.experts"), "ModuleList");
  EXPECT_EQ(type_of(t, "model.layers.1.mlp.experts.7"), "MoeExpert");
  EXPECT_EQ(type_of(t, "model.layers.1.mlp.shared_experts"), "MoeExpert");
  EXPECT_EQ(type_of(t, "model.layers.1"), "MoeDecoderLayer");
  EXPECT_EQ(type_of(t, "model.layers.1.self_attn"), "MoeAttention");
  EXPECT_EQ(shape_of(t, "model.layers.0.mlp.gate_proj.weight"), (Shape{256, 128}));
  EXPECT_EQ(shape_of(t, "model.layers.2.mlp.gate.weight"), (Shape{8, 128}));
  EXPECT_EQ(shape_of(t, "model.layers.2.mlp.experts.5.down_proj.weight"), (Shape{128, 64}));
  EXPECT_EQ(shape_of(t, "model.layers.2.mlp.shared_experts.up_proj.weight"), (Shape{64, 128}));
  EXPECT_EQ(shape_of(t, "model.layers.2.self_attn.v_proj.weight"), (Shape{32, 128}));
  EXPECT_EQ(t.dedicate_rule, "contains:proj");
  EXPECT_EQ(t.recommended_boundary, "types:MoeExpert,MoeDecoderLayer");
  EXPECT_EQ(t.incomplete_boundary, "types:MoeExpert");
}

TEST(MoeLlm, TinyMla) {
  const auto t = build_topology("moe-llm", "tiny-mla");
  // heads 4, qk_nope 16, qk_rope 8, v_head 16, q_lora 64, kv_lora 32, h 128.
  EXPECT_EQ(type_of(t, "model.layers.0.self_attn"), "DeepseekV3Attention");
  EXPECT_EQ(shape_of(t, "model.layers.0.self_attn.q_a_proj.weight"), (Shape{64, 128}));
  EXPECT_EQ(shape_of(t, "model.layers.0.self_attn.q_a_layernorm.weight"), (Shape{64}));
  EXPECT_EQ(shape_of(t, "model.layers.0.self_attn.q_b_proj.weight"), (Shape{4 * 24, 64}));
  EXPECT_EQ(shape_of(t, "model.layers.0.self_attn.kv_a_proj_with_mqa.weight"), (Shape{40, 128}));
  EXPECT_EQ(shape_of(t, "model.layers.0.self_attn.kv_a_layernorm.weight"), (Shape{32}));
  EXPECT_EQ(shape_of(t, "model.layers.0.self_attn.kv_b_proj.weight"), (Shape{4 * 32, 32}));
  EXPECT_EQ(shape_of(t, "model.layers.0.self_attn.o_proj.weight"), (Shape{128, 64}));
}

TEST(MoeLlm, Qwen3_30bA3b) {
  // HF Qwen3MoeForCausalLM (Qwen/Qwen3-30B-A3B config.json): q 32 heads x 128 = 4096 from a
  // 2048-wide hidden state, 4 kv heads, q_norm / k_norm of head_dim, 128 experts of 768 in
  // every layer, no shared expert, untied head.
  const auto t = build_topology("moe-llm", "qwen3-30b-a3b");
  EXPECT_EQ(count(t.tree).mat, 48u * (4 + 1 + 128 * 3) + 2);
  EXPECT_EQ(count(t.tree).vec, 48u * 4 + 1);
  EXPECT_EQ(shape_of(t, "model.layers.0.self_attn.q_proj.weight"), (Shape{4096, 2048}));
  EXPECT_EQ(shape_of(t, "model.layers.0.self_attn.k_proj.weight"), (Shape{512, 2048}));
  EXPECT_EQ(shape_of(t, "model.layers.0.self_attn.o_proj.weight"), (Shape{2048, 4096}));
  EXPECT_EQ(shape_of(t, "model.layers.0.self_attn.q_norm.weight"), (Shape{128}));
  EXPECT_EQ(shape_of(t, "model.layers.47.self_attn.k_norm.weight"), (Shape{128}));
  EXPECT_EQ(shape_of(t, "model.layers.47.mlp.experts.127.down_proj.weight"), (Shape{2048, 768}));
  EXPECT_EQ(shape_of(t, "model.layers.0.mlp.gate.weight"), (Shape{128, 2048}));
  EXPECT_EQ(shape_of(t, "lm_head.weight"), (Shape{151936, 2048}));
  // A query width head_dim does not divide is refused when the geometry is made.
  EXPECT_THROW(build_topology("moe-llm", "qwen3-30b-a3b", {{"q", "4000"}}), InputError);
}

TEST(MoeLlm, Mixtral) {
  const auto t = build_topology("moe-llm", "mixtral-8x7b");
  EXPECT_EQ(count(t.tree).mat, 32u * (4 + 1 + 8 * 3) + 2);  // 930
  EXPECT_EQ(count(t.tree).vec, 32u * 2 + 1);
  EXPECT_EQ(shape_of(t, "model.layers.0.self_attn.q_proj.weight"), (Shape{4096, 4096}));
  EXPECT_EQ(shape_of(t, "model.layers.0.self_attn.k_proj.weight"), (Shape{1024, 4096}));
  EXPECT_EQ(shape_of(t, "model.layers.31.mlp.experts.7.down_proj.weight"), (Shape{4096, 14336}));
  EXPECT_EQ(shape_of(t, "model.layers.0.mlp.gate.weight"), (Shape{8, 4096}));
  EXPECT_FALSE(t.tree.find_module("model.layers.0.mlp.shared_experts"));
  // Mixtral-8x7B: 46.70e9 parameters.
  EXPECT_EQ(t.tree.total_numel(), 46702792704);
}

TEST(MoeLlm, DeepseekV3MatrixCount) {
  // Counts only: build speed is measured by dmuon_planbench (BM_DeepseekEndToEnd4096), never
  // asserted in a unit test.
  const Topology t = build_topology("moe-llm", "deepseek-v3");
  // Matrices: 3 dense layers x (5 MLA + 3 MLP) + 58 MoE layers x (5 MLA + gate + 256 x 3 +
  // shared 3) + embed_tokens + lm_head = 24 + 58 x 777 + 2 = 45092.
  const auto c = count(t.tree);
  EXPECT_EQ(c.mat, 3u * (5 + 3) + 58u * (5 + 1 + 256 * 3 + 3) + 2);
  EXPECT_EQ(c.mat, 45092u);
  // Dedicated by "contains:proj": all but the 58 routers and embed/lm_head = 45032.
  EXPECT_EQ(c.dedicated_proj, 45092u - 58 - 2);
  // 1-D: 61 x (2 layer norms + q_a/kv_a layernorms) + final norm.
  EXPECT_EQ(c.vec, 61u * 4 + 1);
  // Modules: 6 top-level + 3 x 15 (dense) + 58 x (1 + 1 + 7 + 1 + 1 + 1 + 256 x 4 + 4 + 2).
  EXPECT_EQ(t.tree.num_modules(), 6u + 3 * 15 + 58 * 1042);
  EXPECT_EQ(shape_of(t, "model.layers.0.self_attn.q_a_proj.weight"), (Shape{1536, 7168}));
  EXPECT_EQ(shape_of(t, "model.layers.0.self_attn.q_b_proj.weight"), (Shape{24576, 1536}));
  EXPECT_EQ(shape_of(t, "model.layers.0.self_attn.kv_a_proj_with_mqa.weight"), (Shape{576, 7168}));
  EXPECT_EQ(shape_of(t, "model.layers.0.self_attn.kv_b_proj.weight"), (Shape{32768, 512}));
  EXPECT_EQ(shape_of(t, "model.layers.0.self_attn.o_proj.weight"), (Shape{7168, 16384}));
  EXPECT_EQ(shape_of(t, "model.layers.2.mlp.gate_proj.weight"), (Shape{18432, 7168}));
  EXPECT_EQ(shape_of(t, "model.layers.3.mlp.gate.weight"), (Shape{256, 7168}));
  EXPECT_EQ(shape_of(t, "model.layers.3.mlp.experts.255.gate_proj.weight"), (Shape{2048, 7168}));
  EXPECT_EQ(shape_of(t, "model.layers.60.mlp.experts.0.down_proj.weight"), (Shape{7168, 2048}));
  EXPECT_EQ(shape_of(t, "model.layers.60.mlp.shared_experts.up_proj.weight"), (Shape{2048, 7168}));
  EXPECT_EQ(shape_of(t, "lm_head.weight"), (Shape{129280, 7168}));
  EXPECT_EQ(type_of(t, "model.layers.2.mlp"), "MoeMLP");
  EXPECT_EQ(type_of(t, "model.layers.3.mlp"), "MoeSparseBlock");
}

TEST(MoeLlm, KimiK2) {
  // moonshotai/Kimi-K2-Base's config.json: DeepSeek-V3's layout with 64 heads, 384 routed
  // experts, one dense layer (first_k_dense_replace 1) and a 163,840-token vocabulary.
  const Topology t = build_topology("moe-llm", "kimi-k2");
  const auto c = count(t.tree);
  // 1 dense layer x (5 MLA + 3 MLP) + 60 MoE layers x (5 MLA + gate + 384 x 3 + shared 3) + 2.
  EXPECT_EQ(c.mat, 1u * 8 + 60u * (5 + 1 + 384 * 3 + 3) + 2);
  EXPECT_EQ(shape_of(t, "model.layers.0.self_attn.q_b_proj.weight"), (Shape{64 * 192, 1536}));
  EXPECT_EQ(shape_of(t, "model.layers.0.self_attn.kv_b_proj.weight"), (Shape{64 * 256, 512}));
  EXPECT_EQ(shape_of(t, "model.layers.0.self_attn.o_proj.weight"), (Shape{7168, 64 * 128}));
  EXPECT_EQ(shape_of(t, "model.layers.0.mlp.gate_proj.weight"), (Shape{18432, 7168}));
  EXPECT_EQ(shape_of(t, "model.layers.1.mlp.gate.weight"), (Shape{384, 7168}));
  EXPECT_EQ(shape_of(t, "model.layers.60.mlp.experts.383.down_proj.weight"), (Shape{7168, 2048}));
  EXPECT_EQ(shape_of(t, "lm_head.weight"), (Shape{163840, 7168}));
  // About 1.03e12 parameters: 60 x 384 x 3 x 7168 x 2048 = 1.015e12 in the routed experts.
  EXPECT_GT(t.tree.total_numel(), 1.02e12);
  EXPECT_LT(t.tree.total_numel(), 1.05e12);
}

TEST(Overrides, Applied) {
  auto t = build_topology("vla", "tiny", {{"layers", "6"}});  // alias of n_dec
  EXPECT_EQ(t.dim("n_dec"), 6);
  EXPECT_EQ(count(t.tree).mat, 4u * 4 + 6 * 5 + 2);
  EXPECT_TRUE(t.tree.find_module("layers.5"));
  t = build_topology("vla", "tiny", {{"d", "64"}, {"n_vit", "1"}, {"d", "32"}});  // later wins
  EXPECT_EQ(t.dim("d"), 32);
  EXPECT_EQ(shape_of(t, "visual.blocks.0.attn.qkv.weight"), (Shape{96, 32}));
  EXPECT_FALSE(t.tree.find_module("visual.blocks.1"));
  t = build_topology("moe", "paper", {{"E", "2"}, {"layers", "1"}});
  EXPECT_EQ(count(t.tree).mat, 1u * (1 + 2 * 2 + 1));
  t = build_topology("nested", "tiny", {{"layers", "1"}, {"La", "1"}});
  EXPECT_EQ(t.dim("Ll"), 1);
  EXPECT_FALSE(t.tree.find_module("layers.0.model.layers.1"));
  t = build_topology("llm", "mini", {{"layers", "2"}, {"V", "65536"}});
  EXPECT_EQ(shape_of(t, "model.embed_tokens.weight"), (Shape{65536, 1024}));
  EXPECT_EQ(count(t.tree).mat, 2u * 7 + 2);
  t = build_topology("moe-llm", "tiny", {{"first_dense", "0"}, {"shared", "0"}, {"L", "2"}});
  EXPECT_EQ(count(t.tree).mat, 2u * (4 + 1 + 8 * 3) + 2);
  t = build_topology("moe-llm", "tiny", {{"first_dense", "4"}});  // all dense
  EXPECT_EQ(count(t.tree).mat, 4u * 7 + 2);
  EXPECT_EQ(parse_override("d=64"), (std::pair<std::string, std::string>{"d", "64"}));
  EXPECT_EQ(parse_override("a=b=c"), (std::pair<std::string, std::string>{"a", "b=c"}));
}

TEST(Errors, OneLineNamingTheBadValue) {
  expect_input_error([] { build_topology("transformer"); },
                     {"'transformer'", "sequential, vla, moe, nested, llm, moe-llm"});
  expect_input_error([] { topology_info("nope"); }, {"'nope'", "moe-llm"});
  expect_input_error([] { build_topology("vla", "huge"); }, {"'huge'", "paper, tiny"});
  expect_input_error(
      [] {
        build_topology("vla", "tiny", {{"width", "3"}});
      },
      {"'width'", "d, n_vit, n_dec, layers (= n_dec)"});
  expect_input_error(
      [] {
        build_topology("sequential", "tiny", {{"layers", "3"}});
      },
      {"'layers'", "valid: d)"});
  expect_input_error([] { build_topology("vla", "tiny", {{"d", "12x"}}); }, {"'12x'", "integer"});
  expect_input_error([] { build_topology("vla", "tiny", {{"d", ""}}); }, {"''", "integer"});
  expect_input_error([] { build_topology("vla", "tiny", {{"d", "1.5"}}); }, {"'1.5'"});
  expect_input_error([] { build_topology("vla", "tiny", {{"d", "0"}}); }, {"'0'", "1..1048576"});
  expect_input_error([] { build_topology("moe", "tiny", {{"E", "-3"}}); }, {"'-3'", "'E'"});
  expect_input_error(
      [] {
        build_topology("vla", "tiny", {{"d", "99999999999999999999"}});
      },
      {"'99999999999999999999'", "out of range"});
  expect_input_error(
      [] {
        build_topology("llm", "tiny", {{"tie_embeddings", "2"}});
      },
      {"'2'", "0..1"});
  expect_input_error(
      [] {
        build_topology("moe-llm", "tiny", {{"first_dense", "5"}});
      },
      {"first_dense=5", "L=4"});
  expect_input_error([] { build_topology("moe", "tiny", {{"E", "5000"}}); }, {"'5000'", "1..4096"});
  // Rejected from the dimensions alone, before building (4096 x (4 + 3 x 4096) modules).
  expect_input_error(
      [] {
        build_topology("moe", "tiny", {{"E", "4096"}, {"L", "4096"}});
      },
      {"'moe'", "2000000 modules"});
  expect_input_error([] { parse_override("d64"); }, {"'d64'", "KEY=VALUE"});
  expect_input_error([] { parse_override("=64"); }, {"'=64'"});
  expect_input_error([] { build_topology("vla").dim("zz"); }, {"'zz'", "d, n_vit, n_dec"});
}

}  // namespace
}  // namespace dmuon::model
