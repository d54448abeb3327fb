// The baselines' FSDP units (boundary/repeated_blocks.hpp) on hand-built trees, against unit
// lists derived by hand from each structure: one unit per repeated block plus the root.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dmuon/boundary/boundary_policy.hpp"
#include "dmuon/boundary/hook_plan.hpp"
#include "dmuon/boundary/repeated_blocks.hpp"
#include "dmuon/model/module_tree.hpp"

namespace {

using dmuon::model::ModuleTree;
namespace boundary = dmuon::boundary;

std::vector<std::string> unit_paths(const ModuleTree& t) {
  std::vector<std::string> out;
  for (int m : boundary::repeated_block_units(t)) out.push_back(t.module(m).path);
  return out;
}

// The hook sites the units' spec gives, every parameter dedicated.
std::vector<std::string> spec_sites(const ModuleTree& t) {
  std::vector<int> all;
  for (int p : t.parameter_order()) all.push_back(p);
  const auto hooks = boundary::resolve_hook_plan(
      t, all, boundary::BoundaryPolicy::parse(boundary::repeated_blocks_spec(t), true));
  std::vector<std::string> out;
  for (const auto& s : hooks.sites) out.push_back(s.path);
  return out;
}

void decoder_layer(ModuleTree& t, int parent, const std::string& name, const std::string& type) {
  const int l = t.add_module(parent, name, type);
  const int attn = t.add_module(l, "self_attn", "Attention");
  t.add_linear(attn, "q_proj", 8, 8);
  t.add_linear(attn, "o_proj", 8, 8);
  t.add_norm(l, "input_layernorm", "RMSNorm", 8);
}

TEST(RepeatedBlocks, FlatSequentialIsTheRootAlone) {
  ModuleTree t("Sequential");
  t.add_linear(ModuleTree::root, "0", 8, 32);
  t.add_module(ModuleTree::root, "1", "GELU");
  t.add_linear(ModuleTree::root, "2", 32, 8);
  t.finalize();
  EXPECT_EQ(unit_paths(t), std::vector<std::string>{""});
  EXPECT_EQ(spec_sites(t), std::vector<std::string>{""});
  EXPECT_EQ(boundary::repeated_blocks_description(t), "root alone (no repeated blocks)");
}

TEST(RepeatedBlocks, ListOfBareLinearsIsNotBlocks) {
  // Two Linears of one type under index names hold no child modules: not blocks.
  ModuleTree t("Net");
  const int list = t.add_module(ModuleTree::root, "proj", "ModuleList");
  t.add_linear(list, "0", 8, 8);
  t.add_linear(list, "1", 8, 8);
  t.finalize();
  EXPECT_EQ(unit_paths(t), std::vector<std::string>{""});
}

TEST(RepeatedBlocks, LlmDecoderLayersPlusRoot) {
  ModuleTree t("LlamaForCausalLM");
  const int model = t.add_module(ModuleTree::root, "model", "LlamaModel");
  const int embed = t.add_module(model, "embed_tokens", "Embedding");
  t.add_parameter(embed, "weight", {100, 8});
  const int layers = t.add_module(model, "layers", "ModuleList");
  for (int k = 0; k < 3; ++k) decoder_layer(t, layers, std::to_string(k), "LlamaDecoderLayer");
  t.add_norm(model, "norm", "RMSNorm", 8);
  t.add_linear(ModuleTree::root, "lm_head", 8, 100);
  t.finalize();
  const std::vector<std::string> want = {"", "model.layers.0", "model.layers.1", "model.layers.2"};
  EXPECT_EQ(unit_paths(t), want);
  // Embedding, final norm and head are the root's; the sites keep pre-order (root first).
  EXPECT_EQ(spec_sites(t), want);
  EXPECT_EQ(boundary::repeated_blocks_description(t),
            "root + 3 x LlamaDecoderLayer (model.layers.N)");
}

TEST(RepeatedBlocks, MoeLayersNotTheirExperts) {
  ModuleTree t("MoEModel");
  const int layers = t.add_module(ModuleTree::root, "layers", "ModuleList");
  for (int k = 0; k < 2; ++k) {
    const int l = t.add_module(layers, std::to_string(k), "MoELayer");
    t.add_linear(l, "router", 8, 3);
    const int experts = t.add_module(l, "experts", "ModuleList");
    for (int j = 0; j < 3; ++j) {
      const int e = t.add_module(experts, std::to_string(j), "Expert");
      t.add_linear(e, "gate_proj", 8, 16);
      t.add_linear(e, "down_proj", 16, 8);
    }
    t.add_linear(l, "o_proj", 8, 8);
  }
  t.finalize();
  EXPECT_EQ(unit_paths(t), (std::vector<std::string>{"", "layers.0", "layers.1"}));
  // No parameter sits outside a layer: the root holds none, so it is no site.
  EXPECT_EQ(spec_sites(t), (std::vector<std::string>{"layers.0", "layers.1"}));
  EXPECT_EQ(boundary::repeated_blocks_description(t), "root + 2 x MoELayer (layers.N)");
}

TEST(RepeatedBlocks, NestedModelLooksThroughTheOuterLayers) {
  // Outer layers: a backbone and an action expert (different types): not repeated blocks.
  ModuleTree t("VlaPolicy");
  const int outer = t.add_module(ModuleTree::root, "layers", "ModuleList");
  const int vlm = t.add_module(outer, "0", "Qwen2VLModel");
  const int text = t.add_module(vlm, "model", "TextModel");
  const int tl = t.add_module(text, "layers", "ModuleList");
  for (int k = 0; k < 2; ++k) decoder_layer(t, tl, std::to_string(k), "Qwen2VLDecoderLayer");
  const int visual = t.add_module(vlm, "visual", "VisionTransformer");
  const int vb = t.add_module(visual, "blocks", "ModuleList");
  for (int k = 0; k < 2; ++k) decoder_layer(t, vb, std::to_string(k), "VisionBlock");
  t.add_linear(vlm, "lm_head", 8, 100);
  const int expert = t.add_module(outer, "1", "ActionExpert");
  const int el = t.add_module(expert, "layers", "ModuleList");
  for (int k = 0; k < 3; ++k) decoder_layer(t, el, std::to_string(k), "ExpertLayer");
  t.finalize();
  const std::vector<std::string> want = {"",
                                         "layers.0.model.layers.0",
                                         "layers.0.model.layers.1",
                                         "layers.0.visual.blocks.0",
                                         "layers.0.visual.blocks.1",
                                         "layers.1.layers.0",
                                         "layers.1.layers.1",
                                         "layers.1.layers.2"};
  EXPECT_EQ(unit_paths(t), want);
  EXPECT_EQ(spec_sites(t), want);  // lm_head is the root's
}

TEST(RepeatedBlocks, VlaWithOneOuterWrapperUsesTheInnerBlocks) {
  // An outer layers.0 holding the whole policy (one child): looked through.
  ModuleTree t("Wrapper");
  const int outer = t.add_module(ModuleTree::root, "layers", "ModuleList");
  const int vla = t.add_module(outer, "0", "ToyVLA");
  const int visual = t.add_module(vla, "visual", "VisionTower");
  const int blocks = t.add_module(visual, "blocks", "ModuleList");
  for (int k = 0; k < 2; ++k) decoder_layer(t, blocks, std::to_string(k), "VitBlock");
  const int layers = t.add_module(vla, "layers", "ModuleList");
  for (int k = 0; k < 2; ++k) decoder_layer(t, layers, std::to_string(k), "DecoderLayer");
  const int head = t.add_module(vla, "action_head", "ActionHead");
  t.add_linear(head, "fc1", 8, 8);
  t.add_linear(head, "fc2", 8, 7);
  t.finalize();
  const std::vector<std::string> want = {"", "layers.0.visual.blocks.0", "layers.0.visual.blocks.1",
                                         "layers.0.layers.0", "layers.0.layers.1"};
  EXPECT_EQ(unit_paths(t), want);
  EXPECT_EQ(spec_sites(t), want);  // the action head is the root's
  EXPECT_EQ(
      boundary::repeated_blocks_description(t),
      "root + 2 x VitBlock (layers.0.visual.blocks.N) + 2 x DecoderLayer (layers.0.layers.N)");
}

TEST(RepeatedBlocks, BlocksAtTheRootAndRegexCharactersInPaths) {
  // A root nn.Sequential of blocks ("0", "1"), and a container whose path needs escaping.
  ModuleTree t("Sequential");
  decoder_layer(t, ModuleTree::root, "0", "Block");
  decoder_layer(t, ModuleTree::root, "1", "Block");
  t.finalize();
  EXPECT_EQ(unit_paths(t), (std::vector<std::string>{"", "0", "1"}));
  EXPECT_EQ(spec_sites(t), (std::vector<std::string>{"0", "1"}));

  ModuleTree u("Net");
  const int odd = u.add_module(ModuleTree::root, "tower+x", "ModuleList");
  decoder_layer(u, odd, "0", "Block");
  decoder_layer(u, odd, "1", "Block");
  // A sibling "towerrx" would match an unescaped "tower+x": its block stays the root's.
  const int other = u.add_module(ModuleTree::root, "towerrx", "ModuleList");
  const int lone = u.add_module(other, "0", "Block");
  u.add_linear(lone, "fc", 8, 8);
  u.finalize();
  EXPECT_EQ(spec_sites(u), (std::vector<std::string>{"", "tower+x.0", "tower+x.1"}));
}

}  // namespace
