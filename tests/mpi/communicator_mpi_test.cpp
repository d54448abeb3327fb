// MpiCommunicator against hand-computed results at every rank count.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "dmuon/base/error.hpp"
#include "dmuon/comm/communicator.hpp"
#include "mpi_test_util.hpp"

namespace dmuon::comm {
namespace {

using ::dmuon::test::world_rank;
using ::dmuon::test::world_size;
using ::testing::HasSubstr;

std::size_t owner_len(int owner) {
  return 3 + 5 * static_cast<std::size_t>(owner);
}
float owner_value(int owner, std::size_t i) {
  return 1000.0f * static_cast<float>(owner) + static_cast<float>(i) + 0.5f;
}

// SPEC §1: every owner of a site broadcasts its packed buffer; all issued together.
TEST(MpiCommunicator, PackedBroadcastBatchSeveralOwners) {
  auto comm = make_communicator(Backend::mpi, MPI_COMM_WORLD);
  const int n = comm->size();
  const int me = comm->rank();
  std::vector<std::vector<float>> packed(static_cast<std::size_t>(n));
  for (int o = 0; o < n; ++o) {
    packed[o].assign(owner_len(o), -1.0f);
    if (o == me)
      for (std::size_t i = 0; i < owner_len(o); ++i) packed[o][i] = owner_value(o, i);
  }
  comm->group_start();
  EXPECT_TRUE(comm->in_group());
  for (int o = 0; o < n; ++o) comm->broadcast(packed[o].data(), packed[o].size(), DType::f32, o);
  Batch batch = comm->group_end();
  EXPECT_FALSE(comm->in_group());
  batch.wait();
  EXPECT_FALSE(batch.pending());
  for (int o = 0; o < n; ++o)
    for (std::size_t i = 0; i < owner_len(o); ++i)
      ASSERT_EQ(packed[o][i], owner_value(o, i)) << "owner " << o << " element " << i;

  // Hand count: this rank sent its own buffer once, received every other owner's.
  std::uint64_t received = 0;
  for (int o = 0; o < n; ++o)
    if (o != me) received += 4 * owner_len(o);
  const KindCounters& c = comm->counters()[CollectiveKind::broadcast];
  EXPECT_EQ(c.calls, static_cast<std::uint64_t>(n));
  EXPECT_EQ(c.bytes_sent, n > 1 ? 4 * owner_len(me) : 0u);
  EXPECT_EQ(c.bytes_received, received);
}

TEST(MpiCommunicator, BlockingBroadcastOutsideGroup) {
  auto comm = make_communicator(Backend::mpi, MPI_COMM_WORLD);
  const int root = comm->size() - 1;
  std::vector<double> buf(7, comm->rank() == root ? 2.25 : 0.0);
  comm->broadcast(buf.data(), buf.size(), DType::f64, root);
  for (double v : buf) EXPECT_EQ(v, 2.25);
}

// SPEC §6 backward: one AVG reduce per parameter to its owner, a site's reduces together.
TEST(MpiCommunicator, ReduceAvgToEveryOwnerGivesMean) {
  auto comm = make_communicator(Backend::mpi, MPI_COMM_WORLD);
  const int n = comm->size();
  const int me = comm->rank();
  constexpr std::size_t kLen = 9;
  std::vector<float> grad(kLen);
  for (std::size_t i = 0; i < kLen; ++i) grad[i] = static_cast<float>(me) + 0.25f * i;
  std::vector<std::vector<float>> owned(static_cast<std::size_t>(n),
                                        std::vector<float>(kLen, -7.0f));
  comm->group_start();
  for (int o = 0; o < n; ++o)
    comm->reduce_avg(grad.data(), o == me ? owned[o].data() : nullptr, kLen, DType::f32, o);
  comm->group_end().wait();
  const float mean_rank = 0.5f * static_cast<float>(n - 1);
  for (std::size_t i = 0; i < kLen; ++i)
    EXPECT_FLOAT_EQ(owned[me][i], mean_rank + 0.25f * i) << "element " << i;
  for (int o = 0; o < n; ++o)
    if (o != me) {
      EXPECT_EQ(owned[o][0], -7.0f) << "non-root receive buffer was written";
    }

  // In place on the root, and the sum variant.
  std::vector<float> inplace(kLen, static_cast<float>(me + 1));
  comm->reduce_avg(inplace.data(), inplace.data(), kLen, DType::f32, 0);
  if (me == 0) {
    for (float v : inplace) EXPECT_FLOAT_EQ(v, 0.5f * static_cast<float>(n + 1));
  }
  std::vector<float> sum(kLen, 0.0f);
  std::vector<float> ones(kLen, 1.0f);
  comm->reduce_sum(ones.data(), sum.data(), kLen, DType::f32, n - 1);
  if (me == n - 1) {
    for (float v : sum) EXPECT_FLOAT_EQ(v, static_cast<float>(n));
  }
}

TEST(MpiCommunicator, ReduceScatterSumAndAvg) {
  auto comm = make_communicator(Backend::mpi, MPI_COMM_WORLD);
  const int n = comm->size();
  const int me = comm->rank();
  constexpr std::size_t kChunk = 3;
  const std::size_t total = kChunk * static_cast<std::size_t>(n);
  std::vector<float> send(total);
  for (std::size_t j = 0; j < total; ++j) send[j] = 100.0f * me + static_cast<float>(j);
  // Element j summed over ranks: 100·n(n−1)/2 + n·j; mean: 50(n−1) + j.
  std::vector<float> sum(kChunk, 0.0f);
  std::vector<float> avg(kChunk, 0.0f);
  comm->group_start();
  comm->reduce_scatter_sum(send.data(), sum.data(), kChunk, DType::f32);
  comm->reduce_scatter_avg(send.data(), avg.data(), kChunk, DType::f32);
  comm->group_end().wait();
  for (std::size_t k = 0; k < kChunk; ++k) {
    const float j = static_cast<float>(me * kChunk + k);
    EXPECT_FLOAT_EQ(sum[k], 50.0f * n * (n - 1) + n * j);
    EXPECT_FLOAT_EQ(avg[k], 50.0f * (n - 1) + j);
  }
  // In place: the output chunk is this rank's slot of the input.
  std::vector<float> buf = send;
  comm->reduce_scatter_avg(buf.data(), buf.data() + me * kChunk, kChunk, DType::f32);
  for (std::size_t k = 0; k < kChunk; ++k)
    EXPECT_FLOAT_EQ(buf[me * kChunk + k], 50.0f * (n - 1) + static_cast<float>(me * kChunk + k));
}

TEST(MpiCommunicator, AllGather) {
  auto comm = make_communicator(Backend::mpi, MPI_COMM_WORLD);
  const int n = comm->size();
  const int me = comm->rank();
  constexpr std::size_t kChunk = 4;
  std::vector<float> mine(kChunk);
  for (std::size_t i = 0; i < kChunk; ++i) mine[i] = 10.0f * me + i;
  std::vector<float> all(kChunk * n, -1.0f);
  comm->all_gather(mine.data(), all.data(), kChunk, DType::f32);
  for (int r = 0; r < n; ++r)
    for (std::size_t i = 0; i < kChunk; ++i) EXPECT_EQ(all[r * kChunk + i], 10.0f * r + i);
  // In place: own chunk already at its slot.
  std::vector<float> inplace(kChunk * n, -1.0f);
  for (std::size_t i = 0; i < kChunk; ++i) inplace[me * kChunk + i] = mine[i];
  comm->all_gather(inplace.data() + me * kChunk, inplace.data(), kChunk, DType::f32);
  EXPECT_EQ(inplace, all);
}

// Expert parallelism's dispatch: rank r's chunk i lands in rank i's slot r, in a batch with
// a broadcast; bf16 moves bit for bit; buffers that overlap are refused.
TEST(MpiCommunicator, AllToAllSendsEveryChunkToItsRank) {
  auto comm = make_communicator(Backend::mpi, MPI_COMM_WORLD);
  const int n = comm->size();
  const int me = comm->rank();
  constexpr std::size_t kChunk = 3;
  std::vector<float> send(kChunk * n), recv(kChunk * n, -1.0f);
  for (int i = 0; i < n; ++i)
    for (std::size_t j = 0; j < kChunk; ++j) send[i * kChunk + j] = 100.0f * me + 10.0f * i + j;
  float root_value = me == 0 ? 7.0f : 0.0f;
  comm->group_start();
  comm->all_to_all(send.data(), recv.data(), kChunk, DType::f32);
  comm->broadcast(&root_value, 1, DType::f32, 0);
  comm->group_end().wait();
  for (int r = 0; r < n; ++r)
    for (std::size_t j = 0; j < kChunk; ++j)
      EXPECT_EQ(recv[r * kChunk + j], 100.0f * r + 10.0f * me + j) << "from rank " << r;
  EXPECT_EQ(root_value, 7.0f);
  std::vector<std::uint16_t> bsend(n), brecv(n, 0);
  for (int i = 0; i < n; ++i) bsend[i] = static_cast<std::uint16_t>(0x3f80 + 16 * me + i);
  comm->all_to_all(bsend.data(), brecv.data(), 1, DType::bf16);
  for (int r = 0; r < n; ++r) EXPECT_EQ(brecv[r], 0x3f80 + 16 * r + me);
  EXPECT_THROW(comm->all_to_all(send.data(), send.data(), 1, DType::f32), InputError);
}

// Rooted gather and scatter (the TP exchange): every root, batched with a broadcast, bf16
// moved bit for bit, and the root's in-place forms.
TEST(MpiCommunicator, GatherAndScatterAtEveryRoot) {
  auto comm = make_communicator(Backend::mpi, MPI_COMM_WORLD);
  const int n = comm->size();
  const int me = comm->rank();
  constexpr std::size_t kChunk = 3;
  for (int root = 0; root < n; ++root) {
    std::vector<float> mine(kChunk), all(kChunk * n, -1.0f), back(kChunk, -1.0f);
    for (std::size_t i = 0; i < kChunk; ++i) mine[i] = 100.0f * me + i + 0.25f;
    float tag = me == root ? 7.5f : 0.0f;
    comm->group_start();
    comm->gather(mine.data(), me == root ? all.data() : nullptr, kChunk, DType::f32, root);
    comm->broadcast(&tag, 1, DType::f32, root);
    comm->group_end().wait();
    EXPECT_EQ(tag, 7.5f);
    if (me == root) {
      for (int r = 0; r < n; ++r)
        for (std::size_t i = 0; i < kChunk; ++i)
          ASSERT_EQ(all[r * kChunk + i], 100.0f * r + i + 0.25f) << "root " << root;
    }
    // Scatter back what the root gathered, each rank its own chunk.
    comm->scatter(me == root ? all.data() : nullptr, back.data(), kChunk, DType::f32, root);
    EXPECT_EQ(back, mine) << "root " << root;
  }
  // In place on the root: its own chunk already at its slot (gather), left there (scatter).
  std::vector<float> buf(kChunk * n, -1.0f);
  for (std::size_t i = 0; i < kChunk; ++i) buf[me * kChunk + i] = 10.0f * me + i;
  std::vector<float> mine(buf.begin() + me * kChunk, buf.begin() + (me + 1) * kChunk);
  comm->gather(me == 0 ? buf.data() : mine.data(), me == 0 ? buf.data() : nullptr, kChunk,
               DType::f32, 0);
  if (me == 0) {
    for (int r = 0; r < n; ++r) EXPECT_EQ(buf[r * kChunk], 10.0f * r);
  }
  std::vector<float> got(kChunk, -1.0f);
  comm->scatter(me == 0 ? buf.data() : nullptr, me == 0 ? buf.data() : got.data(), kChunk,
                DType::f32, 0);
  if (me != 0) {
    EXPECT_EQ(got, mine);
  }
  // bf16 words move unchanged (0xFFFF is a NaN pattern no arithmetic would keep).
  std::vector<std::uint16_t> w16 = {static_cast<std::uint16_t>(0x3F80 + me), 0xFFFF};
  std::vector<std::uint16_t> g16(2 * static_cast<std::size_t>(n), 0);
  comm->gather(w16.data(), me == 0 ? g16.data() : nullptr, 2, DType::bf16, 0);
  if (me == 0)
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(g16[2 * r], 0x3F80 + r);
      EXPECT_EQ(g16[2 * r + 1], 0xFFFF);
    }
}

TEST(MpiCommunicator, AllReduceSumAvgAndInPlace) {
  auto comm = make_communicator(Backend::mpi, MPI_COMM_WORLD);
  const int n = comm->size();
  const int me = comm->rank();
  std::vector<double> send(5);
  for (std::size_t i = 0; i < send.size(); ++i) send[i] = me * 2.0 + i;
  std::vector<double> sum(5), avg(5);
  comm->group_start();
  comm->all_reduce_sum(send.data(), sum.data(), 5, DType::f64);
  comm->all_reduce_avg(send.data(), avg.data(), 5, DType::f64);
  comm->group_end().wait();
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_DOUBLE_EQ(sum[i], static_cast<double>(n) * (n - 1) + n * static_cast<double>(i));
    EXPECT_DOUBLE_EQ(avg[i], static_cast<double>(n - 1) + static_cast<double>(i));
  }
  std::vector<float> x(6, static_cast<float>(me));
  comm->all_reduce_avg(x.data(), x.data(), x.size(), DType::f32);
  for (float v : x) EXPECT_FLOAT_EQ(v, 0.5f * (n - 1));
}

// The engine's overlap pattern: issue, compute, then wait (or poll with ready()).
TEST(MpiCommunicator, BatchOverlapsComputeAndWaitsLater) {
  auto comm = make_communicator(Backend::mpi, MPI_COMM_WORLD);
  const int n = comm->size();
  constexpr std::size_t kLen = 1 << 16;
  std::vector<float> data(kLen, 1.0f);
  std::vector<float> out(kLen, 0.0f);
  comm->group_start();
  comm->all_reduce_sum(data.data(), out.data(), kLen, DType::f32);
  Batch batch = comm->group_end();
  EXPECT_TRUE(batch.pending());
  double acc = 0.0;  // compute while the batch is in flight
  for (int it = 0; it < 1000 && !batch.ready(); ++it)
    for (int k = 0; k < 1000; ++k) acc += 1e-9 * k;
  EXPECT_GT(acc, -1.0);
  batch.wait();
  EXPECT_FALSE(batch.pending());
  EXPECT_TRUE(batch.ready());
  for (std::size_t i = 0; i < kLen; i += 997) ASSERT_EQ(out[i], static_cast<float>(n));

  // A batch left to its destructor is completed there.
  std::vector<float> v(3, comm->rank() == 0 ? 5.0f : 0.0f);
  {
    comm->group_start();
    comm->broadcast(v.data(), v.size(), DType::f32, 0);
    Batch scoped = comm->group_end();
  }
  EXPECT_EQ(v[2], 5.0f);
  Batch empty;
  EXPECT_FALSE(empty.pending());
  empty.wait();
}

TEST(MpiCommunicator, Bf16MovesAndReducesF16OnlyMoves) {
  auto comm = make_communicator(Backend::mpi, MPI_COMM_WORLD);
  const int n = comm->size();
  std::vector<std::uint16_t> bf(8, comm->rank() == 0 ? 0x3f80 : 0);  // bf16 1.0
  comm->broadcast(bf.data(), bf.size(), DType::bf16, 0);
  for (auto w : bf) EXPECT_EQ(w, 0x3f80);
  EXPECT_EQ(comm->counters()[CollectiveKind::broadcast].calls, 1u);
  // Sum of n ones: n is exact in bf16 (n <= 256); its bits by hand: 1 0x3f80, 2 0x4000,
  // 4 0x4080, 8 0x4100.
  const std::map<int, std::uint16_t> exact = {{1, 0x3f80}, {2, 0x4000}, {4, 0x4080}, {8, 0x4100}};
  std::vector<std::uint16_t> out(8);
  comm->all_reduce_sum(bf.data(), out.data(), bf.size(), DType::bf16);
  if (exact.count(n)) {
    for (auto w : out) EXPECT_EQ(w, exact.at(n)) << n << " ranks";
  }
  // The mean of 1 + r/8 over ranks r < n is 1 + (n-1)/16: exact in bf16 for n in {1,2,4,8}
  // (1.0, 1.0625 = 0x3f88, 1.1875 = 0x3f98, 1.4375 = 0x3fb8).
  const std::map<int, std::uint16_t> mean = {{1, 0x3f80}, {2, 0x3f88}, {4, 0x3f98}, {8, 0x3fb8}};
  std::vector<std::uint16_t> mine(4, static_cast<std::uint16_t>(0x3f80 + 0x10 * comm->rank()));
  std::vector<std::uint16_t> avg(4);
  comm->reduce_avg(mine.data(), avg.data(), mine.size(), DType::bf16, 0);
  if (comm->rank() == 0 && mean.count(n)) {
    for (auto w : avg) EXPECT_EQ(w, mean.at(n)) << n << " ranks";
  }
  try {
    comm->all_reduce_sum(bf.data(), out.data(), bf.size(), DType::f16);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot reduce f16"));
  }
  EXPECT_THROW(comm->reduce_avg(bf.data(), out.data(), 8, DType::f16, 0), InputError);
  EXPECT_EQ(comm->counters()[CollectiveKind::all_reduce].calls, 1u) << "failed call counted";
  EXPECT_FALSE(comm->in_group());
}

TEST(MpiCommunicator, MisuseIsReported) {
  auto comm = make_communicator(Backend::mpi, MPI_COMM_WORLD);
  EXPECT_THROW(comm->group_end(), std::logic_error);
  comm->group_start();
  EXPECT_THROW(comm->group_start(), std::logic_error);
  comm->group_end().wait();
  float x = 0.0f;
  try {
    comm->broadcast(&x, 1, DType::f32, comm->size());
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("root"));
  }
  EXPECT_THROW(comm->broadcast(nullptr, 4, DType::f32, 0), InputError);
  EXPECT_EQ(comm->backend(), Backend::mpi);
  EXPECT_STREQ(backend_name(Backend::nccl), "nccl");
  EXPECT_EQ(comm->stream_handle(), nullptr);
}

}  // namespace
}  // namespace dmuon::comm
