// SPEC §2 vectors for layer_key, verbatim, plus layer_key_module_path.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "dmuon/model/layer_key.hpp"

namespace dmuon::model {
namespace {

TEST(LayerKey, SpecVectors) {
  EXPECT_EQ(layer_key("model.layers.3.mlp.gate_proj.weight"),
            std::optional<std::string>("model.layers.3"));
  EXPECT_EQ(layer_key("visual.blocks.5.attn.qkv.weight"),
            std::optional<std::string>("visual.blocks.5"));
  EXPECT_EQ(layer_key("model.embed_tokens.weight"), std::nullopt);
  EXPECT_EQ(layer_key("lm_head.weight"), std::nullopt);
  EXPECT_EQ(layer_key("layers.0.weight"), std::optional<std::string>("_root.layers.0"));
  EXPECT_EQ(layer_key("blocks.2.weight"), std::optional<std::string>("_root.blocks.2"));
  EXPECT_EQ(layer_key("model.layers.2.blocks.0.x"), std::optional<std::string>("model.layers.2"));
  EXPECT_EQ(layer_key("sublayers.1.w"), std::nullopt);
}

TEST(LayerKey, ExactSegmentsAndFollowerRequired) {
  EXPECT_EQ(layer_key("model.experts.3.w"), std::nullopt);  // "experts" never matches
  EXPECT_EQ(layer_key("model.layers"), std::nullopt);       // no following segment
  EXPECT_EQ(layer_key("layers"), std::nullopt);
  EXPECT_EQ(layer_key(""), std::nullopt);
  // The nested pitfall of SPEC §3: the outer container wins.
  EXPECT_EQ(layer_key("layers.0.model.layers.3.self_attn.q_proj"),
            std::optional<std::string>("_root.layers.0"));
}

TEST(LayerKey, ModulePathIsNeverRewritten) {
  using P = std::optional<std::string>;
  EXPECT_EQ(layer_key_module_path("model.layers.3.mlp"), P("model.layers.3"));
  EXPECT_EQ(layer_key_module_path("layers.0.fc"), P("layers.0"));
  EXPECT_EQ(layer_key_module_path("layers.0"), P("layers.0"));
  EXPECT_EQ(layer_key_module_path("model.layers"), std::nullopt);
  EXPECT_EQ(layer_key_module_path("model.embed"), std::nullopt);
  // A top-level module literally named _root: an ordinary name (issue 11). Its key string is
  // the same as the root-level "layers.0"'s, but the module is its own.
  EXPECT_EQ(layer_key("_root.layers.0.fc"), P("_root.layers.0"));
  EXPECT_EQ(layer_key_module_path("_root.layers.0.fc"), P("_root.layers.0"));
  EXPECT_EQ(layer_key_module_path("_root.blocks.2"), P("_root.blocks.2"));
}

}  // namespace
}  // namespace dmuon::model
