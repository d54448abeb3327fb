// choose_devices on scripted device lists: each case's expected binding is worked out by hand
// from the rule in device_binding.hpp (lists of PCI bus ids as each rank sees them).
#include "dmuon/comm/device_binding.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "dmuon/base/error.hpp"

namespace dmuon::comm {
namespace {

using ::testing::HasSubstr;

const std::string A = "0000:1B:00.0", B = "0000:43:00.0", C = "0000:52:00.0", D = "0000:61:00.0";

std::vector<VisibleDevices> node_of(const std::vector<std::vector<std::string>>& lists) {
  std::vector<VisibleDevices> node;
  for (std::size_t r = 0; r < lists.size(); ++r)
    node.push_back(VisibleDevices{static_cast<int>(r), lists[r], ""});
  return node;
}

std::vector<int> ordinals(const std::vector<DeviceChoice>& choices) {
  std::vector<int> out;
  for (const auto& c : choices) out.push_back(c.ordinal);
  return out;
}

TEST(ChooseDevices, EveryRankSeesEveryGpu) {
  const auto c =
      choose_devices(node_of({{A, B, C, D}, {A, B, C, D}, {A, B, C, D}, {A, B, C, D}}), -1, false);
  EXPECT_EQ(ordinals(c), (std::vector<int>{0, 1, 2, 3}));
  for (const auto& x : c) EXPECT_EQ(x.problem, "");
}

// srun --gpus-per-task=1: every rank sees one GPU, its own, as ordinal 0 (refused before, as
// "4 ranks share 1 visible device").
TEST(ChooseDevices, OneGpuPerTaskThroughCudaVisibleDevices) {
  const auto c = choose_devices(node_of({{A}, {B}, {C}, {D}}), -1, false);
  EXPECT_EQ(ordinals(c), (std::vector<int>{0, 0, 0, 0}));
  for (const auto& x : c) EXPECT_EQ(x.problem, "");
}

// --gpu-bind with two GPUs per pair of tasks.
TEST(ChooseDevices, TwoGpusPerPairOfTasks) {
  const auto c = choose_devices(node_of({{A, B}, {A, B}, {C, D}, {C, D}}), -1, false);
  EXPECT_EQ(ordinals(c), (std::vector<int>{0, 1, 0, 1}));
}

// The same two GPUs in another order (another CUDA_DEVICE_ORDER): counting by position would
// put both ranks on A; by identity rank 1 takes B, its ordinal 0.
TEST(ChooseDevices, SameGpusInAnotherOrder) {
  const auto c = choose_devices(node_of({{A, B}, {B, A}}), -1, false);
  EXPECT_EQ(ordinals(c), (std::vector<int>{0, 0}));
}

// Rank 1 sees A only, so it chooses first; rank 0 then takes B.
TEST(ChooseDevices, TheMostConstrainedRankChoosesFirst) {
  const auto c = choose_devices(node_of({{A, B}, {A}}), -1, false);
  EXPECT_EQ(ordinals(c), (std::vector<int>{1, 0}));
}

TEST(ChooseDevices, MoreRanksThanGpusIsARealDuplicate) {
  const auto c = choose_devices(node_of({{A, B}, {A, B}, {A, B}}), -1, false);
  EXPECT_EQ(c[0].ordinal, 0);
  EXPECT_EQ(c[1].ordinal, 1);
  EXPECT_EQ(c[2].ordinal, -1);
  EXPECT_EQ(c[0].problem, "");
  EXPECT_EQ(c[2].problem,
            "ranks 0 and 2 would both drive GPU 0000:1B:00.0 (rank 2 sees 0000:1B:00.0, "
            "0000:43:00.0); one GPU per rank is needed: give each rank its own "
            "(CUDA_VISIBLE_DEVICES per task) or start fewer ranks per node");
}

TEST(ChooseDevices, SharingAllowedPutsTheExtraRanksOnTakenGpus) {
  const auto c = choose_devices(node_of({{A}, {A}, {A}}), -1, true);
  EXPECT_EQ(ordinals(c), (std::vector<int>{0, 0, 0}));
  for (const auto& x : c) EXPECT_EQ(x.problem, "");
}

TEST(ChooseDevices, RequestedOrdinal) {
  // Ordinal 1 of different lists: distinct GPUs.
  EXPECT_EQ(ordinals(choose_devices(node_of({{A, B}, {C, D}}), 1, false)),
            (std::vector<int>{1, 1}));
  // Ordinal 1 of the same list twice: the same GPU.
  const auto dup = choose_devices(node_of({{A, B}, {A, B}}), 1, false);
  EXPECT_EQ(dup[0].ordinal, 1);
  EXPECT_THAT(dup[1].problem, HasSubstr("ranks 0 and 1 would both drive GPU 0000:43:00.0"));
  const auto missing = choose_devices(node_of({{A, B}}), 2, false);
  EXPECT_EQ(missing[0].problem, "CUDA device 2 requested but only 2 visible");
}

TEST(ChooseDevices, ARankThatSeesNothingKeepsItsReason) {
  auto node = node_of({{A}, {}, {B}});
  node[2].problem = "no CUDA device visible (cudaGetDeviceCount: no CUDA-capable device)";
  const auto c = choose_devices(node, -1, false);
  EXPECT_EQ(c[0].ordinal, 0);
  EXPECT_EQ(c[1].problem, "no CUDA device visible (0 devices)");
  EXPECT_EQ(c[2].problem, node[2].problem);
  EXPECT_EQ(c[2].ordinal, -1);
}

TEST(SharedGpuAllowed, ReadsTheTestSwitch) {
  ::unsetenv("DMUON_ALLOW_SHARED_GPU");
  EXPECT_FALSE(shared_gpu_allowed());
  ::setenv("DMUON_ALLOW_SHARED_GPU", "0", 1);
  EXPECT_FALSE(shared_gpu_allowed());
  ::setenv("DMUON_ALLOW_SHARED_GPU", "1", 1);
  EXPECT_TRUE(shared_gpu_allowed());
  ::setenv("DMUON_ALLOW_SHARED_GPU", "yes", 1);
  try {
    (void)shared_gpu_allowed();
    ADD_FAILURE() << "DMUON_ALLOW_SHARED_GPU=yes accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("DMUON_ALLOW_SHARED_GPU='yes' is invalid (valid: 1"));
  }
  ::unsetenv("DMUON_ALLOW_SHARED_GPU");
}

}  // namespace
}  // namespace dmuon::comm
