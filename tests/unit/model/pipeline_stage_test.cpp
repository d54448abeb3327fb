// A pipeline rank's model (model/pipeline_stage.hpp) against splits counted by hand.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dmuon/base/error.hpp"
#include "dmuon/model/pipeline_stage.hpp"

namespace {

using namespace dmuon;
using namespace dmuon::model;
using V = std::vector<int>;

TEST(PipelineStage, ChunksSplitTheBlocksEarlyChunksTakingTheRest) {
  EXPECT_EQ(stage_blocks(32, 4, 1, 0), (V{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(stage_blocks(32, 4, 1, 3), (V{24, 25, 26, 27, 28, 29, 30, 31}));
  // 10 blocks over 4 chunks: 3, 3, 2, 2.
  EXPECT_EQ(stage_blocks(10, 4, 1, 0), (V{0, 1, 2}));
  EXPECT_EQ(stage_blocks(10, 4, 1, 1), (V{3, 4, 5}));
  EXPECT_EQ(stage_blocks(10, 4, 1, 2), (V{6, 7}));
  EXPECT_EQ(stage_blocks(10, 4, 1, 3), (V{8, 9}));
  // Interleaved: 16 blocks, 2 ranks x 2 chunks of 4; rank 0 holds chunks 0 and 2.
  EXPECT_EQ(stage_blocks(16, 2, 2, 0), (V{0, 1, 2, 3, 8, 9, 10, 11}));
  EXPECT_EQ(stage_blocks(16, 2, 2, 1), (V{4, 5, 6, 7, 12, 13, 14, 15}));
}

// Llama-3-8B on 4 ranks: 8 layers each, the embedding on the first, norm and head on the last;
// the four stages hold every parameter once, by the same names.
TEST(PipelineStage, StagesHoldTheModelOnceByItsNames) {
  const Topology whole = build_topology("llm", "llama3-8b");
  std::int64_t total = 0;
  for (int p = 0; p < 4; ++p) {
    const Topology s = pipeline_stage(whole, 4, 1, p);
    total += s.tree.total_numel();
    const bool first = p == 0, last = p == 3;
    EXPECT_EQ(s.tree.find_module("model.embed_tokens").has_value(), first);
    EXPECT_EQ(s.tree.find_module("lm_head").has_value(), last);
    EXPECT_EQ(s.tree.find_module("model.norm").has_value(), last);
    EXPECT_TRUE(s.tree.find_module(fmt::format("model.layers.{}", 8 * p)).has_value());
    EXPECT_TRUE(s.tree.find_module(fmt::format("model.layers.{}", 8 * p + 7)).has_value());
    EXPECT_FALSE(s.tree.find_module(fmt::format("model.layers.{}", (8 * p + 8) % 32)).has_value());
    EXPECT_EQ(s.geometry->embedding.empty(), !first);
    EXPECT_EQ(s.geometry->head.empty(), !last);
  }
  EXPECT_EQ(total, whole.tree.total_numel());
  EXPECT_EQ(stage_summary(whole, 4, 1, 0), "blocks 0-7 + embedding");
  EXPECT_EQ(stage_summary(whole, 4, 1, 3), "blocks 24-31 + head");
  EXPECT_EQ(stage_summary(whole, 8, 2, 1), "blocks 2-3, 18-19");
}

std::string error_of(const std::string& topology, const std::string& preset, int P, int v) {
  try {
    (void)pipeline_stage(build_topology(topology, preset), P, v, 0);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(PipelineStage, RefusesWhatDoesNotSplit) {
  EXPECT_NE(error_of("llm", "tiny", 8, 1).find("has 4 blocks, fewer than the 8 chunks"),
            std::string::npos);
  EXPECT_NE(error_of("llm", "tiny", 2, 4).find("valid: --pp and --pp-chunks with P x v <= 4"),
            std::string::npos);
  EXPECT_EQ(error_of("llm", "tiny", 2, 2), "");
  // One block: no split at all (the message in the singular).
  try {
    (void)pipeline_stage(build_topology("llm", "tiny", {{"L", "1"}}), 2, 1, 0);
    ADD_FAILURE() << "a one-block model split into 2 stages";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("has 1 block, fewer than the 2 chunks"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("valid: a model of 2 or more blocks"), std::string::npos);
  }
  EXPECT_NE(error_of("llm", "qwen2.5-1.5b", 2, 1).find("is tied across pipeline ranks"),
            std::string::npos);
  EXPECT_NE(error_of("vla", "tiny", 2, 1).find("stacks (valid: a model with one stack"),
            std::string::npos);
}

}  // namespace
