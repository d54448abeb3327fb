// How many EP ranks a token's experts lie on (work/ep_routing.hpp), against counts made by
// hand and against an enumeration of every k-subset (the uniform formula's meaning).

#include <gtest/gtest.h>

#include <set>

#include "dmuon/base/error.hpp"
#include "dmuon/work/ep_routing.hpp"

namespace {

using namespace dmuon;
using namespace dmuon::work;

// The mean over every k-subset of n experts of the ranks (n/E consecutive experts each) it
// touches: what "uniform" means, counted.
double enumerated_uniform(int n, int k, int ep) {
  const int per_rank = n / ep;
  double sum = 0, subsets = 0;
  for (unsigned mask = 0; mask < (1u << n); ++mask) {
    if (__builtin_popcount(mask) != k) continue;
    std::set<int> ranks;
    for (int x = 0; x < n; ++x)
      if (mask & (1u << x)) ranks.insert(x / per_rank);
    sum += static_cast<double>(ranks.size());
    subsets += 1;
  }
  return sum / subsets;
}

TEST(EpRouting, UniformCountsTheRanksOfARandomSubset) {
  // Mixtral's 8 experts, top-2, EP 2: 12 of the 28 pairs on one rank, 16 across: 44/28.
  EXPECT_DOUBLE_EQ(destination_ranks(8, 2, 2, ExpertRouting::uniform), 44.0 / 28.0);
  EXPECT_NEAR(destination_ranks(12, 3, 3, ExpertRouting::uniform), enumerated_uniform(12, 3, 3),
              1e-12);
  EXPECT_NEAR(destination_ranks(16, 4, 8, ExpertRouting::uniform), enumerated_uniform(16, 4, 8),
              1e-12);
  EXPECT_NEAR(destination_ranks(16, 6, 4, ExpertRouting::uniform), enumerated_uniform(16, 6, 4),
              1e-12);
  // More experts than one rank holds outside any rank: every rank is visited.
  EXPECT_DOUBLE_EQ(destination_ranks(4, 4, 2, ExpertRouting::uniform), 2);
  // top-k capped at the experts.
  EXPECT_DOUBLE_EQ(destination_ranks(8, 16, 2, ExpertRouting::uniform), 2);
}

TEST(EpRouting, ConsecutiveFollowsAutoModelsFakeBalancedGate) {
  // Qwen3-30B-A3B on EP 8: 16 experts a rank, a token's 8 start at a multiple of 8: one rank.
  EXPECT_DOUBLE_EQ(destination_ranks(128, 8, 8, ExpertRouting::consecutive), 1);
  // DeepSeek-V3 on EP 64: 4 experts a rank, 8 adjacent ones: always two ranks.
  EXPECT_DOUBLE_EQ(destination_ranks(256, 8, 64, ExpertRouting::consecutive), 2);
  // Kimi K2 on EP 32: 12 a rank; starts 8t mod 12 cycle 0, 8, 4: 1, 2, 1 ranks.
  EXPECT_DOUBLE_EQ(destination_ranks(384, 8, 32, ExpertRouting::consecutive), 4.0 / 3.0);
  // Mixtral EP 2: experts 2t, 2t+1 share a rank.
  EXPECT_DOUBLE_EQ(destination_ranks(8, 2, 2, ExpertRouting::consecutive), 1);
  // 3 experts a token over ranks of 2: windows 0-2, 3-5 (wrapping 6, 7, 0 …) span two.
  EXPECT_DOUBLE_EQ(destination_ranks(8, 3, 4, ExpertRouting::consecutive), 2);
}

TEST(EpRouting, OneRankAndBadShapes) {
  EXPECT_DOUBLE_EQ(destination_ranks(8, 2, 1, ExpertRouting::uniform), 1);
  EXPECT_DOUBLE_EQ(destination_ranks(8, 2, 1, ExpertRouting::consecutive), 1);
  EXPECT_THROW(destination_ranks(10, 2, 4, ExpertRouting::uniform), InputError);
  EXPECT_THROW(destination_ranks(0, 2, 1, ExpertRouting::uniform), InputError);
  EXPECT_THROW(destination_ranks(8, 0, 2, ExpertRouting::uniform), InputError);
}

TEST(EpRouting, FlagNames) {
  EXPECT_STREQ(ep_dispatcher_name(EpDispatcher::all_to_all), "all-to-all");
  EXPECT_STREQ(ep_dispatcher_name(EpDispatcher::deepep), "deepep");
  EXPECT_STREQ(expert_routing_name(ExpertRouting::uniform), "uniform");
  EXPECT_STREQ(expert_routing_name(ExpertRouting::consecutive), "consecutive");
}

}  // namespace
