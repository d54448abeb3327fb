// Model geometry: the real presets carry their published configs' heads, widths and routing;
// dimensions that form no geometry are one-line errors; the topology file's optional
// "geometry" object round-trips and rejects bad input with one-line errors.

#include <gtest/gtest.h>

#include <functional>

#include "dmuon/base/error.hpp"
#include "dmuon/model/topology.hpp"
#include "dmuon/model/topology_file.hpp"
#include "input_error_message.hpp"

namespace {

using namespace dmuon;
using namespace dmuon::model;

using test::input_error_message;

const StackGeometry& text(const Topology& t) {
  for (const auto& s : t.geometry->stacks)
    if (s.name == "text") return s;
  throw std::logic_error("no text stack");
}

TEST(Geometry, RealPresetsCarryTheirConfigs) {
  // HF config.json: (num_attention_heads, num_key_value_heads, head_dim).
  const std::vector<std::tuple<const char*, std::int64_t, std::int64_t>> gqa = {
      {"llama3-8b", 32, 8},      {"qwen2.5-1.5b", 12, 2}, {"llama3.2-3b", 24, 8},
      {"qwen2.5-7b", 28, 4},     {"qwen2.5-14b", 40, 8},  {"llama3-70b", 64, 8},
      {"llama3.1-405b", 128, 8}, {"llama2-13b", 40, 40},  {"llama2-70b", 64, 8}};
  for (const auto& [preset, heads, kv] : gqa) {
    const auto t = build_topology("llm", preset);
    const auto& a = text(t).attention;
    EXPECT_EQ(a.kind, AttentionKind::gqa) << preset;
    EXPECT_EQ(a.heads, heads) << preset;
    EXPECT_EQ(a.kv_heads, kv) << preset;
    EXPECT_EQ(a.head_dim, 128) << preset;
    EXPECT_TRUE(a.causal);
    EXPECT_EQ(text(t).norm, NormKind::rms);
    EXPECT_EQ(text(t).activation, Activation::swiglu);
    EXPECT_EQ(t.geometry->head, "lm_head");
  }
  const auto mixtral = build_topology("moe-llm", "mixtral-8x7b");
  EXPECT_EQ(text(mixtral).attention.heads, 32);
  EXPECT_EQ(text(mixtral).attention.kv_heads, 8);
  ASSERT_TRUE(text(mixtral).moe);
  EXPECT_EQ(text(mixtral).moe->top_k, 2);
  EXPECT_EQ(text(mixtral).moe->scoring, RouterScoring::softmax);
  EXPECT_EQ(text(mixtral).moe->shared, "");
  const auto ds = build_topology("moe-llm", "deepseek-v3");
  const auto& a = text(ds).attention;
  EXPECT_EQ(a.kind, AttentionKind::mla);
  EXPECT_EQ(a.heads, 128);
  EXPECT_EQ(a.q_lora, 1536);
  EXPECT_EQ(a.kv_lora, 512);
  EXPECT_EQ(a.qk_nope, 128);
  EXPECT_EQ(a.qk_rope, 64);
  EXPECT_EQ(a.v_head, 128);
  EXPECT_EQ(a.qk_dim(), 192);
  EXPECT_EQ(text(ds).moe->top_k, 8);
  EXPECT_EQ(text(ds).moe->scoring, RouterScoring::sigmoid);
  EXPECT_EQ(text(ds).moe->shared, "shared_experts");
  // Qwen2-VL-7B's vision tower: 16 heads of 80, bidirectional, LayerNorm.
  const auto vl = build_topology("nested", "paper");
  const auto& vision = vl.geometry->stacks.front();
  EXPECT_EQ(vision.tokens, TokenStream::vision);
  EXPECT_EQ(vision.attention.heads, 16);
  EXPECT_EQ(vision.attention.head_dim, 80);
  EXPECT_FALSE(vision.attention.causal);
  EXPECT_EQ(vision.norm, NormKind::layer);
  EXPECT_EQ(vl.geometry->vision_tokens, 256);
}

TEST(Geometry, EveryBuiltinHasOneAndOverridesReachIt) {
  for (const auto& info : builtin_topologies())
    for (const auto& preset : info.presets)
      EXPECT_TRUE(build_topology(info.name, preset).geometry.has_value()) << info.name;
  EXPECT_EQ(text(build_topology("llm", "tiny", {{"head_dim", "16"}})).attention.heads, 8);
  const std::string e = input_error_message([] { build_topology("llm", "tiny", {{"h", "100"}}); });
  EXPECT_NE(e.find("h=100 is not a multiple of head_dim=32"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos);
}

TEST(Geometry, RoundTripsThroughTheTopologyFile) {
  for (const auto& info : builtin_topologies())
    for (const auto& preset : info.presets) {
      if (preset == "llama3.1-405b" || preset == "deepseek-v3") continue;  // large; same code
      const auto t = build_topology(info.name, preset);
      const auto back = parse_topology_json(write_topology_json(t), "mem");
      ASSERT_TRUE(back.geometry.has_value()) << info.name << "/" << preset;
      EXPECT_TRUE(*back.geometry == *t.geometry) << info.name << "/" << preset;
    }
}

// The llm tiny file with its "geometry" replaced by `geometry`.
std::string with_geometry(const std::string& geometry) {
  std::string text = write_topology_json(build_topology("llm", "tiny"));
  const auto begin = text.find("  \"geometry\": ");
  const auto end = text.find("  \"modules\": ");
  return text.replace(begin, end - begin, "  \"geometry\": " + geometry + ",\n");
}

TEST(Geometry, BadFileGeometryIsAOneLineError) {
  const std::string stack =
      "{\"blocks\": \"model.layers\", \"hidden\": 128, \"attention\": \"gqa\", \"heads\": 4, "
      "\"kv_heads\": 1, \"head_dim\": 32, \"attention_modules\": \"self_attn\", "
      "\"mlp_modules\": \"mlp\", \"activation\": \"swiglu\"";
  const auto file = [&](const std::string& extra, const std::string& top = "") {
    return with_geometry("{" + top + "\"stacks\": [" + stack + extra + "}]}");
  };
  // A minimal valid one first.
  const auto ok = parse_topology_json(file(""), "t.json");
  ASSERT_TRUE(ok.geometry);
  EXPECT_EQ(ok.geometry->stacks[0].attention.heads, 4);
  struct Case {
    std::string text, expect;
  };
  const Case cases[] = {
      {file(", \"colour\": 1"), "t.json: geometry.stacks[0]: unknown key \"colour\""},
      {file(", \"norm\": \"batch\""), "\"norm\": unknown norm 'batch' (valid: none, rms, layer)"},
      {file("", "\"head\": \"model.nope\", "),
       "t.json: geometry: head 'model.nope' is not a module"},
      {file(", \"moe_router\": \"gate\""), "moe_* keys need \"moe_top_k\""},
      {with_geometry("{}"), "t.json: geometry: missing \"stacks\""},
      {with_geometry("{\"stacks\": []}"), "t.json: geometry: no stacks"},
      {file(", \"causal\": 1"), "\"causal\" is 1 (must be true or false)"},
      {file(", \"tokens\": \"vision\""), "vision_tokens is 0 (must be > 0)"},
  };
  for (const auto& c : cases) {
    const std::string e = input_error_message([&] { parse_topology_json(c.text, "t.json"); });
    EXPECT_NE(e.find(c.expect), std::string::npos) << "got: " << e << "\nwant: " << c.expect;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  // Inconsistent numbers: heads not a multiple of kv_heads; a missing block module.
  std::string bad = stack;
  bad.replace(bad.find("\"kv_heads\": 1"), 13, "\"kv_heads\": 3");
  std::string e = input_error_message(
      [&] { parse_topology_json(with_geometry("{\"stacks\": [" + bad + "}]}"), "t.json"); });
  EXPECT_NE(e.find("t.json: geometry: stack 'stack0': heads=4 is not a multiple of kv_heads=3"),
            std::string::npos)
      << e;
  bad = stack;
  bad.replace(bad.find("\"self_attn\""), 11, "\"attention\"");
  e = input_error_message(
      [&] { parse_topology_json(with_geometry("{\"stacks\": [" + bad + "}]}"), "t.json"); });
  EXPECT_NE(e.find("block module 'model.layers.0.attention' is not a module"), std::string::npos)
      << e;
}

}  // namespace
