// The NCCL backend through the common factory. Which outcome is right depends on the build and
// the machine, and each is asserted exactly:
//   built without NCCL          -> RuntimeFailure "NCCL backend not compiled: ..."
//   NCCL, no CUDA device        -> RuntimeFailure "... no CUDA device visible ..." on every rank
//   NCCL, two ranks of a node on one GPU -> RuntimeFailure naming both ranks and the GPU
//   NCCL, one device per rank   -> real collectives on device buffers, checked against host math

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "cuda_probe.hpp"
#include "dmuon/base/build_info.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/comm/communicator.hpp"
#include "mpi_test_util.hpp"

namespace dmuon::comm {
namespace {

using ::dmuon::test::world_size;
using ::testing::HasSubstr;

int node_ranks() {
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int n = 1;
  MPI_Comm_size(node, &n);
  MPI_Comm_free(&node);
  return n;
}

int min_over_ranks(int v) {
  int out = 0;
  MPI_Allreduce(&v, &out, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return out;
}

void run_device_collectives(Communicator& comm) {
  const int n = comm.size();
  const int me = comm.rank();
  constexpr std::size_t kChunk = 4;
  const std::size_t total = kChunk * static_cast<std::size_t>(n);
  std::vector<float> host(total);
  for (std::size_t j = 0; j < total; ++j) host[j] = static_cast<float>(me) + j;
  void* d_in = test::device_alloc(total * sizeof(float));
  void* d_out = test::device_alloc(total * sizeof(float));
  test::copy_to_device(d_in, host.data(), total * sizeof(float));

  comm.group_start();
  comm.all_reduce_avg(d_in, d_out, total, DType::f32);
  Batch b = comm.group_end();
  b.wait();
  std::vector<float> out(total);
  test::copy_to_host(out.data(), d_out, total * sizeof(float));
  for (std::size_t j = 0; j < total; ++j) EXPECT_FLOAT_EQ(out[j], 0.5f * (n - 1) + j);

  comm.broadcast(d_in, total, DType::f32, n - 1);
  test::copy_to_host(out.data(), d_in, total * sizeof(float));
  for (std::size_t j = 0; j < total; ++j) EXPECT_FLOAT_EQ(out[j], static_cast<float>(n - 1) + j);

  comm.all_gather(static_cast<float*>(d_out), d_in, kChunk, DType::f32);
  comm.reduce_scatter_sum(d_in, d_out, kChunk, DType::f32);
  EXPECT_EQ(comm.counters()[CollectiveKind::all_reduce].calls, 1u);
  EXPECT_EQ(comm.counters()[CollectiveKind::broadcast].bytes_received,
            me != n - 1 ? total * 4 : 0u);
  EXPECT_NE(comm.stream_handle(), nullptr);
  test::device_free(d_in);
  test::device_free(d_out);
}

TEST(NcclCommunicator, CreatesOrFailsWithTheDocumentedMessage) {
  const int devices = test::visible_cuda_devices();
  const int fewest = min_over_ranks(devices);
  const bool enough = fewest > 0 && node_ranks() <= fewest;
  try {
    auto comm = make_communicator(Backend::nccl, MPI_COMM_WORLD);
    ASSERT_TRUE(build_info::have_nccl) << "NCCL communicator created without NCCL";
    ASSERT_TRUE(enough) << "NCCL communicator created without a device per rank";
    EXPECT_EQ(comm->backend(), Backend::nccl);
    EXPECT_EQ(comm->size(), world_size());
    run_device_collectives(*comm);
  } catch (const RuntimeFailure& e) {
    if (test::world_rank() == 0) std::printf("# NCCL backend unavailable here: %s\n", e.what());
    if (!build_info::have_nccl) {
      EXPECT_STREQ(e.what(),
                   "NCCL backend not compiled: rebuild with -DDMUON_ENABLE_CUDA=ON and NCCL "
                   "installed");
    } else if (devices == 0) {
      EXPECT_THAT(e.what(), HasSubstr("NCCL communicator: no CUDA device visible"));
    } else if (fewest == 0) {
      EXPECT_THAT(e.what(), HasSubstr("another rank could not select a CUDA device"));
    } else if (!enough) {
      EXPECT_THAT(e.what(), HasSubstr("one GPU per rank is needed"));
    } else {
      FAIL() << "NCCL communicator failed with devices available: " << e.what();
    }
  }
}

}  // namespace
}  // namespace dmuon::comm
