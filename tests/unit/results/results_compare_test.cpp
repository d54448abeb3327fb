// Comparison of results files: exact deterministic quantities, timings within a tolerance.

#include <gtest/gtest.h>

#include "dmuon/base/error.hpp"
#include "dmuon/results/compare.hpp"
#include "sample_record.hpp"

namespace {

using namespace dmuon;
using namespace dmuon::results;

TEST(Compare, IdenticalFilesAreOk) {
  const auto a = fixture::sample_file();
  const auto c = compare_results(a, a, 0.1);
  ASSERT_EQ(c.runs.size(), 2u);
  EXPECT_TRUE(c.ok());
  EXPECT_EQ(c.runs[0].check(), "OK");
  EXPECT_DOUBLE_EQ(c.runs[0].a_step_ms, 12.5);
}

TEST(Compare, DeterministicDifferencesAreMismatches) {
  const auto a = fixture::sample_file();
  auto b = a;
  b.runs[0].collectives.calls_per_step[1] += 1;
  b.runs[0].params.owner_rank[0] = 0;
  b.runs[0].sites.owners[0] = {1};
  const auto c = compare_results(a, b, 0.1);
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(c.mismatches(), 1);
  EXPECT_EQ(c.regressions(), 0);
  const auto& m = c.runs[0].mismatches;
  ASSERT_EQ(m.size(), 3u);
  EXPECT_NE(m[0].find("site 0 (layers.0) owners"), std::string::npos) << m[0];
  EXPECT_NE(m[1].find("owner of layers.0.w: A rank 1 vs B rank 0"), std::string::npos) << m[1];
  EXPECT_NE(m[2].find("broadcast calls/step rank 1: A 2 vs B 3"), std::string::npos) << m[2];
  EXPECT_EQ(c.runs[0].check(), "MISMATCH");
}

TEST(Compare, TimingsWithinToleranceOnly) {
  const auto a = fixture::sample_file();
  auto b = a;
  b.runs[0].summary["step_ms"] = 12.5 * 1.05;
  EXPECT_TRUE(compare_results(a, b, 0.1).ok());
  b.runs[0].summary["step_ms"] = 12.5 * 1.2;
  auto c = compare_results(a, b, 0.1);
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(c.regressions(), 1);
  EXPECT_EQ(c.runs[0].check(), "SLOWER");
  EXPECT_TRUE(compare_results(a, b, 0.25).ok());
  b.runs[0].summary["step_ms"] = 12.5 * 0.5;  // faster: an improvement, not a failure
  c = compare_results(a, b, 0.1);
  EXPECT_TRUE(c.ok());
  EXPECT_EQ(c.runs[0].check(), "FASTER");
  EXPECT_THROW(compare_results(a, b, -1), InputError);
}

TEST(Compare, OptimizerTimeFromTimingsWhenNoSummary) {
  const auto a = fixture::sample_file();
  auto b = a;
  for (auto& s : b.runs[0].timings.seconds) s *= 2;  // optimizer phase doubles
  const auto c = compare_results(a, b, 0.1);
  EXPECT_EQ(c.regressions(), 1);
  ASSERT_EQ(c.runs[0].regressions.size(), 1u);
  EXPECT_NE(c.runs[0].regressions[0].find("optimizer_ms"), std::string::npos);
}

TEST(Compare, UnmatchedRuns) {
  const auto a = fixture::sample_file();
  auto b = a;
  b.runs[0].method = "fsdp-adamw";
  const auto c = compare_results(a, b, 0.1);
  EXPECT_EQ(c.only_a.size(), 1u);
  EXPECT_EQ(c.only_b.size(), 1u);
  EXPECT_FALSE(c.ok());  // a run of the baseline disappeared
  const auto d = compare_results(b, fixture::sample_file(), 0.1);
  EXPECT_EQ(d.only_a.size(), 1u);
  auto e = a;
  e.runs.pop_back();
  EXPECT_TRUE(compare_results(e, a, 0.1).ok());  // a new run in B alone is fine
}

TEST(Compare, StatusChangeIsAMismatch) {
  const auto a = fixture::sample_file();
  auto b = a;
  b.runs[1].status = "ok";
  const auto c = compare_results(a, b, 0.1);
  EXPECT_EQ(c.mismatches(), 1);
  EXPECT_NE(c.runs[1].mismatches[0].find("status: A rejected vs B ok"), std::string::npos);
}

}  // namespace
