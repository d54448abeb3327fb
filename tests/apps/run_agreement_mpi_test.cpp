// agree_on_run across ranks: equal descriptions pass; otherwise every rank throws the same
// one-line InputError naming the lowest rank that differs from rank 0, whatever the lengths of
// the ranks' descriptions (no rank may be left in a collective).

#include <gtest/gtest.h>
#include <mpi.h>

#include <string>

#include "common/run_agreement.hpp"
#include "dmuon/base/error.hpp"

namespace {

using dmuon::apps::agree_on_run;
using dmuon::apps::RunDescription;

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

RunDescription base() {
  RunDescription d;
  d.add("method", "dmuon");
  d.add("steps", 2);
  return d;
}

// The message every rank got ("" when agree_on_run returned).
std::string outcome(const RunDescription& d) {
  try {
    agree_on_run(MPI_COMM_WORLD, d);
  } catch (const dmuon::InputError& e) {
    return e.what();
  }
  return "";
}

TEST(AgreeOnRun, EqualDescriptionsPass) {
  EXPECT_EQ(outcome(base()), "");
}

TEST(AgreeOnRun, TheLowestDifferingRankSpeaksOnEveryRank) {
  const int rank = world_rank(), size = world_size();
  if (size < 2) GTEST_SKIP() << "needs 2 ranks";
  // The upper half runs 3 steps; the last rank also has a line more.
  RunDescription d;
  d.add("method", "dmuon");
  d.add("steps", rank >= size / 2 ? 3 : 2);
  if (rank == size - 1) d.add("extra", "line");
  EXPECT_EQ(outcome(d), "rank " + std::to_string(size / 2) +
                            " resolved a different run than rank 0: steps = 3 (rank 0: 2)");
}

TEST(AgreeOnRun, OnlyALongerDescriptionDiffers) {
  const int rank = world_rank(), size = world_size();
  if (size < 2) GTEST_SKIP() << "needs 2 ranks";
  auto d = base();
  if (rank == size - 1)
    for (int i = 0; i < 1000; ++i) d.add("topology: module 'm" + std::to_string(i) + "' type", "L");
  EXPECT_EQ(outcome(d), "rank " + std::to_string(size - 1) +
                            " resolved a different run than rank 0: topology: module 'm0' type "
                            "= L (rank 0: (none))");
}

TEST(AgreeOnRun, StillUsableAfterADisagreement) {
  (void)outcome(world_rank() == 0 ? RunDescription() : base());
  EXPECT_EQ(outcome(base()), "");
}

}  // namespace
