// RankGroups: the communicators of a rank grid R rows × G columns × T, w = (r·G + s)·T + t:
// the row (shard group), the column (replicate group), the TP group and (--ep E < G) the
// expert group of every rank, each ranked by its grid member index. Expected members are spelled
// out from the definition.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dmuon/base/error.hpp"
#include "dmuon/comm/communicator.hpp"
#include "dmuon/comm/rank_groups.hpp"
#include "mpi_test_util.hpp"

namespace dmuon::comm {
namespace {

using ::dmuon::test::world_rank;
using ::dmuon::test::world_size;
using ::testing::HasSubstr;

// World ranks of the members of `comm`, in its rank order.
std::vector<int> members(MPI_Comm comm) {
  int n = 0;
  MPI_Comm_size(comm, &n);
  const int me = world_rank();
  std::vector<int> all(static_cast<std::size_t>(n), -1);
  MPI_Allgather(&me, 1, MPI_INT, all.data(), 1, MPI_INT, comm);
  return all;
}

void expect_groups(int replicate, int tp) {
  const int n = world_size();
  const int me = world_rank();
  const int g = n / replicate / tp;
  const RankGroups groups(MPI_COMM_WORLD, RankGrid::of(replicate, g, tp));
  EXPECT_EQ(groups.world_rank(), me);
  // The definition, by hand: t = w mod T, d = w div T, s = d mod G, r = d div G.
  const int t = me % tp, d = me / tp, s = d % g, r = d / g;
  std::vector<int> row, column, tp_group;
  for (int c = 0; c < g; ++c) row.push_back((r * g + c) * tp + t);
  for (int q = 0; q < replicate; ++q) column.push_back((q * g + s) * tp + t);
  for (int u = 0; u < tp; ++u) tp_group.push_back(d * tp + u);
  EXPECT_EQ(members(groups.comm(CommGroup::shard)), row) << "R " << replicate << " T " << tp;
  EXPECT_EQ(members(groups.comm(CommGroup::replicate)), column);
  EXPECT_EQ(members(groups.comm(CommGroup::tp)), tp_group);
  EXPECT_EQ(groups.comm(CommGroup::world), MPI_COMM_WORLD);
}

TEST(RankGroups, EveryFactorizationOfTheWorld) {
  const int n = world_size();
  for (int r = 1; r <= n; ++r)
    for (int t = 1; r * t <= n; ++t)
      if (n % (r * t) == 0) expect_groups(r, t);
}

TEST(RankGroups, TwoByTwoByTwoSpelledOut) {
  if (world_size() != 8) GTEST_SKIP() << "needs 8 ranks";
  const RankGroups groups(MPI_COMM_WORLD, RankGrid::of(2, 2, 2));
  // Rank 6: t 0, DP rank 3 = row 1, column 1.
  const auto row = members(groups.comm(CommGroup::shard));
  const auto column = members(groups.comm(CommGroup::replicate));
  const auto tp = members(groups.comm(CommGroup::tp));
  if (world_rank() == 6) {
    EXPECT_EQ(row, (std::vector<int>{4, 6}));
    EXPECT_EQ(column, (std::vector<int>{2, 6}));
    EXPECT_EQ(tp, (std::vector<int>{6, 7}));
  }
}

// --ep E < G: the expert group of w holds the ranks of its row whose columns equal its own mod
// E, ranked by column div E (spelled out: R 2 x G 4 x T 1, E 2 on 8 ranks: rank 5 = row 1,
// column 1 is with rank 7).
TEST(RankGroups, ExpertGroupsSpelledOut) {
  if (world_size() != 8) GTEST_SKIP() << "needs 8 ranks";
  RankGrid grid = RankGrid::of(2, 4, 1);
  grid.ep = 2;
  const RankGroups groups(MPI_COMM_WORLD, grid);
  const auto expert = members(groups.comm(CommGroup::expert));
  const int w = world_rank(), row = w / 4, column = w % 4;
  EXPECT_EQ(expert, (std::vector<int>{row * 4 + column % 2, row * 4 + column % 2 + 2}));
  if (w == 5) {
    EXPECT_EQ(expert, (std::vector<int>{5, 7}));
  }
  EXPECT_EQ(grid.group_size(CommGroup::expert), 2);
  EXPECT_EQ(grid.instances(CommGroup::expert), 4);
  for (int v = 0; v < 8; ++v)  // rank_of inverts (instance, member)
    EXPECT_EQ(grid.rank_of(CommGroup::expert, grid.instance(v, CommGroup::expert),
                           grid.member(v, CommGroup::expert)),
              v);
  // The EP group (the tokens' all-to-alls): the E = 2 consecutive columns of w's row, one of
  // each EP rank: rank 5 (row 1, column 1) exchanges with rank 4; rank 6 with rank 7.
  const auto ep = members(groups.comm(CommGroup::ep));
  EXPECT_EQ(ep, (std::vector<int>{row * 4 + column / 2 * 2, row * 4 + column / 2 * 2 + 1}));
  if (w == 5) {
    EXPECT_EQ(ep, (std::vector<int>{4, 5}));
  }
  EXPECT_EQ(grid.group_size(CommGroup::ep), 2);
  EXPECT_EQ(grid.instances(CommGroup::ep), 4);
  for (int v = 0; v < 8; ++v) {
    EXPECT_EQ(grid.member(v, CommGroup::ep), grid.ep_rank(v));
    EXPECT_EQ(
        grid.rank_of(CommGroup::ep, grid.instance(v, CommGroup::ep), grid.member(v, CommGroup::ep)),
        v);
  }
}

TEST(RankGroups, AGridOfAnotherSizeIsRefusedOnEveryRank) {
  const int n = world_size();
  try {
    RankGroups groups(MPI_COMM_WORLD, RankGrid::of(1, n + 1, 1));
    FAIL() << "a grid of " << n + 1 << " ranks accepted on " << n;
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr(std::to_string(n + 1) + " ranks"));
    EXPECT_THAT(e.what(), HasSubstr("has " + std::to_string(n)));
  }
}

TEST(RankGroups, CommunicatorsRankByMemberIndex) {
  const int n = world_size();
  const int replicate = n % 2 == 0 ? 2 : 1;
  const RankGroups groups(MPI_COMM_WORLD, RankGrid::of(replicate, n / replicate));
  auto row = make_communicator(Backend::mpi, groups.comm(CommGroup::shard));
  auto col = make_communicator(Backend::mpi, groups.comm(CommGroup::replicate));
  EXPECT_EQ(row->size(), n / replicate);
  EXPECT_EQ(row->rank(), world_rank() % (n / replicate));
  EXPECT_EQ(col->size(), replicate);
  EXPECT_EQ(col->rank(), world_rank() / (n / replicate));
  double me = world_rank();
  double row_sum = 0.0;
  row->all_reduce_sum(&me, &row_sum, 1, DType::f64);
  double expected = 0.0;
  for (int s = 0; s < n / replicate; ++s)
    expected += (world_rank() / (n / replicate)) * (n / replicate) + s;
  EXPECT_EQ(row_sum, expected);
}

}  // namespace
}  // namespace dmuon::comm
