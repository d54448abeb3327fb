// An expert-parallel rank's model (model/expert_local_tree.hpp): counted by hand on the tiny
// MoE presets (8 routed experts in each of layers 1..3 of moe-llm, 3 Linears each); local
// expert j of EP rank e is the model's expert e·8/E + j; the synthetic data still routes over
// all 8; the refusals name the bad value.

#include <gtest/gtest.h>

#include <functional>

#include "dmuon/base/error.hpp"
#include "dmuon/engine/step/synthetic.hpp"
#include "dmuon/model/expert_local_tree.hpp"
#include "dmuon/model/topology.hpp"
#include "input_error_message.hpp"

namespace {

using namespace dmuon;
using namespace dmuon::model;

using test::input_error_message;

TEST(ExpertLocalTree, KeepsOneRanksShareOfEveryContainer) {
  const Topology t = build_topology("moe-llm", "tiny");
  ASSERT_EQ(t.tree.num_parameters(), 114u);
  ASSERT_EQ(t.tree.num_modules(), 159u);
  EXPECT_EQ(expert_containers(t.tree).size(), 3u);  // layer 0 is dense
  // Each dropped expert: its module, 3 Linear modules, 3 weights.
  for (auto [ep, dropped] : {std::pair{1, 0}, {2, 4}, {4, 6}, {8, 7}}) {
    const ModuleTree local = expert_local_tree(t.tree, ep);
    EXPECT_EQ(local.num_parameters(), 114u - 3u * 3u * static_cast<unsigned>(dropped)) << ep;
    EXPECT_EQ(local.num_modules(), 159u - 3u * 4u * static_cast<unsigned>(dropped)) << ep;
    for (int c : expert_containers(local)) {
      EXPECT_EQ(local.module(c).children.size(), 8u / static_cast<unsigned>(ep));
      EXPECT_EQ(local.module(c).ep_size, ep);
      EXPECT_EQ(local.module(c).routed_top_k,
                t.tree.module(*t.tree.find_module(local.module(c).path)).routed_top_k);
    }
  }
  // Everything outside the experts keeps its name and order.
  const ModuleTree local = expert_local_tree(t.tree, 4);
  EXPECT_EQ(local.parameter(local.parameter_order()[0]).name, "model.embed_tokens.weight");
  EXPECT_TRUE(local.find_parameter("model.layers.3.mlp.shared_experts.down_proj.weight"));
  EXPECT_TRUE(local.find_parameter("model.layers.3.mlp.experts.1.down_proj.weight"));
  EXPECT_FALSE(local.find_parameter("model.layers.3.mlp.experts.2.down_proj.weight"));
}

TEST(ExpertLocalTree, LocalExpertsNameTheModelsExperts) {
  const Topology t = build_topology("moe-llm", "tiny");
  const ModuleTree local = expert_local_tree(t.tree, 4);
  const int pid = *local.find_parameter("model.layers.1.mlp.experts.1.up_proj.weight");
  const ExpertSlot slot = expert_slot(local, pid);
  EXPECT_EQ(local.module(slot.container).path, "model.layers.1.mlp.experts");
  EXPECT_EQ(slot.local, 1);
  // EP rank e of 4 holds experts 2e and 2e + 1.
  EXPECT_EQ(global_parameter_name(local, pid, 0), "model.layers.1.mlp.experts.1.up_proj.weight");
  EXPECT_EQ(global_parameter_name(local, pid, 3), "model.layers.1.mlp.experts.7.up_proj.weight");
  const int dense = *local.find_parameter("model.layers.1.self_attn.q_proj.weight");
  EXPECT_EQ(expert_slot(local, dense).container, -1);
  EXPECT_EQ(global_parameter_name(local, dense, 3), "model.layers.1.self_attn.q_proj.weight");
  // The synthetic data routes over the model's 8 experts, not the rank's 2: a local expert
  // trains on as many samples as the model's.
  const int global = *t.tree.find_parameter("model.layers.1.mlp.experts.7.up_proj.weight");
  for (std::int64_t tokens : {1, 64, 1000})
    EXPECT_EQ(engine::param_samples(local, pid, tokens),
              engine::param_samples(t.tree, global, tokens));
}

TEST(ExpertLocalTree, TiesBetweenKeptModulesStay) {
  ModuleTree tree("M");
  const int layer = tree.add_module(0, "layer", "L");
  const int w = tree.add_parameter(layer, "w", {2, 2});
  tree.tie_parameter(tree.add_module(layer, "head", "H"), "w", w);  // tied outside the experts
  const int experts = tree.add_module(layer, "experts", "ModuleList");
  for (const char* e : {"0", "1"}) tree.add_parameter(tree.add_module(experts, e, "E"), "v", {3});
  tree.finalize();
  const ModuleTree local = expert_local_tree(tree, 2);
  ASSERT_EQ(local.num_parameters(), 2u);
  EXPECT_TRUE(local.parameter(0).tied());
  EXPECT_EQ(local.parameter(0).name, "layer.w");
  EXPECT_EQ(local.parameter(1).name, "layer.experts.0.v");
}

TEST(ExpertLocalTree, RefusalsNameTheBadValue) {
  const Topology moe = build_topology("moe-llm", "tiny");
  EXPECT_EQ(input_error_message([&] { (void)expert_local_tree(moe.tree, 3); }),
            "--ep 3 does not divide the 8 experts of 'model.layers.1.mlp.experts' (valid: a "
            "divisor of every expert container's count)");
  EXPECT_EQ(input_error_message([&] { (void)expert_local_tree(moe.tree, 0); }),
            "--ep 0 is invalid (valid: >= 1)");
  EXPECT_EQ(
      input_error_message([&] { (void)expert_local_tree(build_topology("llm", "tiny").tree, 2); }),
      "--ep 2: the model has no routed experts (no module 'experts' with children 0, 1, "
      "...)");
  // A parameter shared by expert 1 (dropped on the first rank) and expert 0 (kept).
  ModuleTree tree("M");
  const int experts = tree.add_module(tree.add_module(0, "layer", "L"), "experts", "ModuleList");
  const int w = tree.add_parameter(tree.add_module(experts, "0", "E"), "w", {2, 2});
  tree.tie_parameter(tree.add_module(experts, "1", "E"), "w", w);
  tree.finalize();
  EXPECT_EQ(input_error_message([&] { (void)expert_local_tree(tree, 2); }),
            "--ep: parameter 'layer.experts.0.w' is tied to a routed expert another EP rank "
            "holds");
  // Unlike experts cannot stand for each other on another rank.
  ModuleTree unlike("M");
  const int u = unlike.add_module(unlike.add_module(0, "layer", "L"), "experts", "ModuleList");
  unlike.add_parameter(unlike.add_module(u, "0", "E"), "w", {2, 2});
  unlike.add_parameter(unlike.add_module(u, "1", "E"), "w", {2, 3});
  unlike.finalize();
  EXPECT_EQ(input_error_message([&] { (void)expert_local_tree(unlike, 2); }),
            "--ep 2: expert 'layer.experts.1' differs from 'layer.experts.0' in its modules or "
            "parameter shapes (valid: --ep with alike experts: each rank's model has the same "
            "shapes)");
  // Children not named 0, 1, ... are no routed experts.
  ModuleTree odd("M");
  const int c = odd.add_module(odd.add_module(0, "layer", "L"), "experts", "ModuleList");
  odd.add_parameter(odd.add_module(c, "a", "E"), "w", {2, 2});
  odd.finalize();
  EXPECT_TRUE(expert_containers(odd).empty());
}

TEST(ExpertLocalTree, SplitsOverTheSizesThatDivideEveryContainer) {
  // moe-llm tiny: 8 routed experts in each MoE layer; llm: none.
  const auto moe = build_topology("moe-llm", "tiny").tree;
  for (int ep : {2, 4, 8}) EXPECT_TRUE(experts_split_over(moe, ep)) << ep;
  for (int ep : {-1, 0, 1, 3, 16}) EXPECT_FALSE(experts_split_over(moe, ep)) << ep;
  EXPECT_FALSE(experts_split_over(build_topology("llm", "tiny").tree, 2));
  // DeepSeek-V3: 256 a layer (the advisor's --ep 256 at 256 ranks, none at 512).
  const auto ds = build_topology("moe-llm", "deepseek-v3").tree;
  EXPECT_TRUE(experts_split_over(ds, 256));
  EXPECT_FALSE(experts_split_over(ds, 512));
}

}  // namespace
