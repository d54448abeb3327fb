// RankLayout: R rows × G columns, rank = r·G + s; row = shard group, column = replicate group.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dmuon/base/error.hpp"
#include "dmuon/comm/communicator.hpp"
#include "dmuon/comm/rank_layout.hpp"
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

void expect_layout(int replicate) {
  const int n = world_size();
  const int me = world_rank();
  RankLayout layout(MPI_COMM_WORLD, replicate);
  const int g = n / replicate;
  ASSERT_EQ(layout.replicate_size(), replicate);
  ASSERT_EQ(layout.shard_size(), g);
  EXPECT_EQ(layout.world_rank(), me);
  EXPECT_EQ(layout.world_size(), n);
  EXPECT_EQ(layout.row(), me / g);
  EXPECT_EQ(layout.column(), me % g);
  EXPECT_EQ(layout.world_rank_of(layout.row(), layout.column()), me);
  std::vector<int> row_expected, col_expected;
  for (int s = 0; s < g; ++s) row_expected.push_back(layout.row() * g + s);
  for (int r = 0; r < replicate; ++r) col_expected.push_back(r * g + layout.column());
  EXPECT_EQ(members(layout.shard_comm()), row_expected);
  EXPECT_EQ(members(layout.replicate_comm()), col_expected);
}

TEST(RankLayout, ReplicateTwoRowsAndColumns) {
  if (world_size() % 2 != 0) {
    EXPECT_THROW(RankLayout(MPI_COMM_WORLD, 2), InputError);
    return;
  }
  expect_layout(2);
  if (world_size() == 8) {  // 2 × 4 spelled out: rank 6 is row 1, column 2
    RankLayout layout(MPI_COMM_WORLD, 2);
    if (world_rank() == 6) {
      EXPECT_EQ(members(layout.shard_comm()), (std::vector<int>{4, 5, 6, 7}));
      EXPECT_EQ(members(layout.replicate_comm()), (std::vector<int>{2, 6}));
    } else {
      members(layout.shard_comm());
      members(layout.replicate_comm());
    }
  }
}

TEST(RankLayout, EveryDivisorOfTheWorld) {
  for (int r = 1; r <= world_size(); ++r)
    if (world_size() % r == 0) expect_layout(r);
}

TEST(RankLayout, InvalidReplicateErrors) {
  const int n = world_size();
  for (int bad : {0, -1, 3, 2 * n}) {
    if (bad >= 1 && n % bad == 0) continue;  // 3 divides no tested world except 3, 6
    try {
      RankLayout layout(MPI_COMM_WORLD, bad);
      FAIL() << "R=" << bad << " accepted at world size " << n;
    } catch (const InputError& e) {
      EXPECT_THAT(e.what(), HasSubstr("R=" + std::to_string(bad)));
      EXPECT_THAT(e.what(), HasSubstr(std::to_string(n)));
    }
  }
}

TEST(RankLayout, CommunicatorsOnRowsAndColumns) {
  const int n = world_size();
  const int replicate = n % 2 == 0 ? 2 : 1;
  RankLayout layout(MPI_COMM_WORLD, replicate);
  auto row = make_communicator(Backend::mpi, layout.shard_comm());
  auto col = make_communicator(Backend::mpi, layout.replicate_comm());
  EXPECT_EQ(row->size(), layout.shard_size());
  EXPECT_EQ(row->rank(), layout.column());
  EXPECT_EQ(col->size(), layout.replicate_size());
  EXPECT_EQ(col->rank(), layout.row());
  double me = world_rank();
  double row_sum = 0.0, col_sum = 0.0;
  row->all_reduce_sum(&me, &row_sum, 1, DType::f64);
  col->all_reduce_sum(&me, &col_sum, 1, DType::f64);
  double row_expected = 0.0, col_expected = 0.0;
  for (int s = 0; s < layout.shard_size(); ++s)
    row_expected += layout.world_rank_of(layout.row(), s);
  for (int r = 0; r < layout.replicate_size(); ++r)
    col_expected += layout.world_rank_of(r, layout.column());
  EXPECT_EQ(row_sum, row_expected);
  EXPECT_EQ(col_sum, col_expected);
}

}  // namespace
}  // namespace dmuon::comm
