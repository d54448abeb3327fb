// bind_device under mpiexec with scripted device lists (no GPU needed): the exchange among the
// ranks of the node and the agreement of every rank. Needs two ranks on a node for the
// duplicate; at one rank only the own-GPU case runs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>

#include "dmuon/comm/device_binding.hpp"
#include "mpi_test_util.hpp"

namespace dmuon::comm {
namespace {

using ::dmuon::test::world_rank;
using ::dmuon::test::world_size;
using ::testing::HasSubstr;

// A made-up bus id per index ("0000:05:00.0" for 5).
std::string bus_id(int i) {
  return "0000:" + std::to_string(10 + i) + ":00.0";
}

TEST(BindDevice, EachRankOnItsOwnVisibleGpu) {
  // Per-task CUDA_VISIBLE_DEVICES: every rank sees one GPU, its own.
  const VisibleDevices mine{world_rank(), {bus_id(world_rank())}, ""};
  const DeviceBinding b = bind_device(MPI_COMM_WORLD, mine, -1, false);
  EXPECT_TRUE(b.ok()) << b.problem;
  EXPECT_EQ(b.ordinal, 0);
}

TEST(BindDevice, EveryRankSeesEveryGpu) {
  VisibleDevices mine{world_rank(), {}, ""};
  for (int i = 0; i < world_size(); ++i) mine.bus_ids.push_back(bus_id(i));
  const DeviceBinding b = bind_device(MPI_COMM_WORLD, mine, -1, false);
  EXPECT_TRUE(b.ok()) << b.problem;
  EXPECT_EQ(b.ordinal, world_rank());  // one node: node-local rank == world rank
}

TEST(BindDevice, OneGpuForEveryRankIsRefusedOnEveryRank) {
  if (world_size() < 2) GTEST_SKIP() << "a duplicate needs two ranks";
  const VisibleDevices mine{world_rank(), {bus_id(0)}, ""};
  const DeviceBinding b = bind_device(MPI_COMM_WORLD, mine, -1, false);
  EXPECT_FALSE(b.ok());
  EXPECT_EQ(b.ordinal, -1);
  EXPECT_EQ(b.failed_rank, 1);  // rank 0 took it first; rank 1 is the first refused
  EXPECT_THAT(b.problem, HasSubstr("ranks 0 and 1 would both drive GPU 0000:10:00.0"));
}

TEST(BindDevice, SharingAllowedBindsEveryRankToTheOneGpu) {
  const VisibleDevices mine{world_rank(), {bus_id(0)}, ""};
  const DeviceBinding b = bind_device(MPI_COMM_WORLD, mine, -1, true);
  EXPECT_TRUE(b.ok()) << b.problem;
  EXPECT_EQ(b.ordinal, 0);
}

TEST(BindDevice, ARankWithoutDevicesFailsEveryRank) {
  const int last = world_size() - 1;
  VisibleDevices mine{world_rank(), {bus_id(world_rank())}, ""};
  if (world_rank() == last) {
    mine.bus_ids.clear();
    mine.problem = "no CUDA device visible (scripted)";
  }
  const DeviceBinding b = bind_device(MPI_COMM_WORLD, mine, -1, false);
  EXPECT_EQ(b.failed_rank, last);
  EXPECT_EQ(b.problem, "no CUDA device visible (scripted)");
  EXPECT_EQ(b.own_problem, world_rank() == last ? b.problem : "");
}

}  // namespace
}  // namespace dmuon::comm
