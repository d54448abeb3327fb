// Synthetic training data: how many global samples each parameter trains on (routed experts
// see top-2 of their layer's E experts) and how ranks split them. Hand-computed answers.

#include <gtest/gtest.h>

#include <string>

#include "dmuon/engine/step/synthetic.hpp"
#include "dmuon/model/topology.hpp"

namespace {

using namespace dmuon;

int pid_of(const model::ModuleTree& tree, const std::string& name) {
  const auto p = tree.find_parameter(name);
  EXPECT_TRUE(p.has_value()) << name;
  return p.value_or(0);
}

TEST(Synthetic, ExpertsSeeTopTwoOfTheirLayersExperts) {
  const auto topo = model::build_topology("moe", "tiny", {{"E", "4"}});
  const auto& t = topo.tree;
  EXPECT_EQ(engine::param_samples(t, pid_of(t, "layers.0.experts.3.down_proj.weight"), 64), 32);
  EXPECT_EQ(engine::param_samples(t, pid_of(t, "layers.0.o_proj.weight"), 64), 64);
  const auto wide = model::build_topology("moe", "tiny", {{"E", "16"}});
  const int ex = pid_of(wide.tree, "layers.1.experts.15.down_proj.weight");
  EXPECT_EQ(engine::param_samples(wide.tree, ex, 64), 8);  // 64 * 2 / 16
  EXPECT_EQ(engine::param_samples(wide.tree, ex, 4), 1);   // never fewer than one sample
  const auto single = model::build_topology("moe", "tiny", {{"E", "1"}});
  EXPECT_EQ(engine::param_samples(single.tree,
                                  pid_of(single.tree, "layers.0.experts.0.down_proj.weight"), 64),
            64);  // top-k capped at E
}

TEST(Synthetic, SharedExpertsAreDense) {
  const auto topo = model::build_topology("moe-llm", "tiny", {{"shared", "1"}});
  const auto& t = topo.tree;
  for (const auto& p : t.parameters())
    if (p.name.find("shared_experts") != std::string::npos) {
      EXPECT_EQ(engine::param_samples(t, *t.find_parameter(p.name), 48), 48) << p.name;
      return;
    }
  FAIL() << "moe-llm tiny with shared=1 has no shared expert";
}

TEST(Synthetic, RanksSplitTheGlobalSamplesExactly) {
  const auto topo = model::build_topology("sequential");
  const int pid = topo.tree.parameter_order().front();
  std::int64_t total = 0;
  const std::int64_t expected[] = {3, 3, 4};  // floor(10·r/3) boundaries: 0, 3, 6, 10
  for (int r = 0; r < 3; ++r) {
    const auto range = engine::sample_range(topo.tree, pid, 10, r, 3);
    EXPECT_EQ(range.local(), expected[r]) << "rank " << r;
    EXPECT_EQ(range.begin, total) << "rank " << r;
    total += range.local();
  }
  EXPECT_EQ(total, 10);
}

}  // namespace
