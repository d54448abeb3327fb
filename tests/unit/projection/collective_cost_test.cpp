// The collective cost model against times worked out by hand from its documented formulas
// (collective_cost.hpp): measured α/β machines, and NCCL's constants (src/graph/tuning.cc).

#include <gtest/gtest.h>

#include "dmuon/project/collective_cost.hpp"
#include "test_machines.hpp"

namespace {

using namespace dmuon;
using comm::CollectiveKind;
using project::collective_time;
using project::CommSpan;

constexpr double us = 1e-6, ms = 1e-3;

TEST(CollectiveCost, BroadcastAtKnownLatencyAndBandwidth) {
  // α = 10 µs measured at 4 ranks, β = 5 GB/s: 1e6 floats = 4 MB.
  const auto m = project::testing::measured_machine(4, 10, 5);
  const auto t = collective_time(m, CollectiveKind::broadcast, 1'000'000, 4, {4, 1});
  EXPECT_NEAR(t.latency_s, 10 * us, 1e-12);
  EXPECT_NEAR(t.transfer_s, 4e6 / 5e9, 1e-12);  // 0.8 ms
  // At 8 ranks the chain is 7 hops instead of 3: α scales to 70/3 µs.
  const auto t8 = collective_time(m, CollectiveKind::broadcast, 1'000'000, 4, {8, 1});
  EXPECT_NEAR(t8.latency_s, 70.0 / 3 * us, 1e-12);
  EXPECT_NEAR(t8.transfer_s, 0.8 * ms, 1e-12);
}

TEST(CollectiveCost, RingAllReduceAtKnownLatencyAndBandwidth) {
  // α = 20 µs (two traversals) at 4 ranks, β = 5 GB/s; busbw factor 2·3/4.
  const auto m = project::testing::measured_machine(4, 10, 5);
  const auto t = collective_time(m, CollectiveKind::all_reduce, 1'000'000, 4, {4, 1});
  EXPECT_NEAR(t.latency_s, 20 * us, 1e-12);
  EXPECT_NEAR(t.transfer_s, 4e6 * 1.5 / 5e9, 1e-12);  // 1.2 ms
  // all_gather of a 1e6-float chunk: S = 16 MB, factor 3/4.
  const auto g = collective_time(m, CollectiveKind::all_gather, 1'000'000, 4, {4, 1});
  EXPECT_NEAR(g.total_s(), 10 * us + 12e6 / 5e9, 1e-12);
  // Nothing moves on one rank or with no bytes.
  EXPECT_EQ(collective_time(m, CollectiveKind::all_reduce, 100, 4, {1, 1}).total_s(), 0);
  EXPECT_EQ(collective_time(m, CollectiveKind::broadcast, 0, 4, {4, 1}).total_s(), 0);
}

TEST(CollectiveCost, NcclRingAllReduceLargeMessage) {
  // 8 ranks on one NVLink domain of 300 GB/s, 1 GB: ring/Simple = 8.4 + 14·3.4 µs latency and
  // 1e9·(2·7/8) / 300e9 s; ring/LL has a quarter of the bandwidth and the tree is capped at
  // 110 GB/s with 2·7·28 µs of latency: both slower.
  const auto m = project::testing::nccl_machine(8, 300, 40);
  const auto t = collective_time(m, CollectiveKind::all_reduce, 250'000'000, 4, {8, 1});
  EXPECT_STREQ(t.algorithm, "ring");
  EXPECT_STREQ(t.protocol, "simple");
  EXPECT_NEAR(t.latency_s, 56.0 * us, 1e-12);
  EXPECT_NEAR(t.transfer_s, 1e9 * 1.75 / 300e9, 1e-12);
}

TEST(CollectiveCost, NcclSmallAllReducePicksLowLatency) {
  // 4 KB on 8 ranks: ring/LL 6.6 + 14·0.47 µs + 4096·1.75 / 75e9 s beats the tree/LL
  // (6.8 + 2·7·0.52 µs) and anything Simple (56 µs and more).
  const auto m = project::testing::nccl_machine(8, 300, 40);
  const auto t = collective_time(m, CollectiveKind::all_reduce, 1024, 4, {8, 1});
  EXPECT_STREQ(t.protocol, "ll");
  EXPECT_STREQ(t.algorithm, "ring");
  EXPECT_NEAR(t.total_s(), 13.18 * us + 4096 * 1.75 / 75e9, 1e-12);
}

TEST(CollectiveCost, NcclCrossDomainUsesTheNics) {
  const auto m = project::testing::nccl_machine(8, 300, 40);
  // 16 ranks on 2 domains, 8 per domain: min(300, 8·40) = 300 GB/s; 15 hops, one between
  // domains: 8.4 + 14·3.4 + 9.6 µs.
  const auto a = collective_time(m, CollectiveKind::broadcast, 250'000'000, 4, {16, 2});
  EXPECT_NEAR(a.latency_s, 65.6 * us, 1e-12);
  EXPECT_NEAR(a.transfer_s, 1e9 / 300e9, 1e-12);
  // One rank per domain (an HSDP column): one NIC, 40 GB/s; 3 hops, all between domains.
  const auto b = collective_time(m, CollectiveKind::broadcast, 25'000'000, 4, {4, 4});
  EXPECT_NEAR(b.latency_s, (8.4 + 3 * 9.6) * us, 1e-12);
  EXPECT_NEAR(b.transfer_s, 1e8 / 40e9, 1e-12);
}

TEST(CollectiveCost, ABatchPaysOneLatencyAndPicksOneProtocol) {
  // 1 MB broadcasts on 8 ranks: alone, LL wins (9.89 µs + 1e6 / 100e9 s against
  // 32.2 µs + 1e6 / 300e9 s); ten in one group share one latency, and Simple wins:
  // 32.2 µs + 10·1e6 / 300e9 s.
  const auto m = project::testing::nccl_machine(8, 300, 40);
  const auto one = collective_time(m, CollectiveKind::broadcast, 250'000, 4, {8, 1});
  EXPECT_STREQ(one.protocol, "ll");
  EXPECT_NEAR(one.total_s(), 9.89 * us + 1e6 / 100e9, 1e-12);
  const std::vector<project::CallSize> ten(10, {CollectiveKind::broadcast, 250'000, 4});
  const auto batch = project::batch_time(m, ten, {8, 1});
  EXPECT_STREQ(batch.protocol, "simple");
  EXPECT_NEAR(batch.latency_s, 32.2 * us, 1e-12);
  EXPECT_NEAR(batch.transfer_s, 10 * 1e6 / 300e9, 1e-12);
}

TEST(CollectiveCost, ACpuBatchPaysEveryLatency) {
  // MPI progresses a batch's nonblocking collectives one after another on the rank's core:
  // three 1 KB broadcasts at α = 10 µs, 5 GB/s cost 3·10 µs + 3·1024 / 5e9 s.
  const auto m = project::testing::measured_machine(4, 10, 5, "cpu");
  const std::vector<project::CallSize> three(3, {CollectiveKind::broadcast, 256, 4});
  const auto t = project::batch_time(m, three, {4, 1});
  EXPECT_NEAR(t.latency_s, 30 * us, 1e-12);
  EXPECT_NEAR(t.transfer_s, 3 * 1024 / 5e9, 1e-15);
}

// A gather/scatter (the TP exchange): the root's link carries (T − 1)/T of B = T·count·e, for
// both kinds alike.
TEST(CollectiveCost, TpExchangeGatherAndScatter) {
  const auto m = project::testing::nccl_machine(8, 300, 40);
  // T = 2 in one domain, 1e6 floats per rank: 4 MB over the root's NVLink. Simple: 8.4 + 3.4 µs
  // + 4e6 / 300e9 s; LL (a third of the bandwidth, 6.6 + 0.47 µs) is slower here.
  auto t = project::collective_time(m, comm::CollectiveKind::gather, 1'000'000, 4, {2, 1});
  EXPECT_STREQ(t.protocol, "simple");
  EXPECT_NEAR(t.latency_s, 11.8 * us, 1e-12);
  EXPECT_NEAR(t.transfer_s, 4e6 / 300e9, 1e-12);
  // T = 4: the root takes 3 of the 4 shards.
  t = project::collective_time(m, comm::CollectiveKind::gather, 1'000'000, 4, {4, 1});
  EXPECT_NEAR(t.total_s(), 11.8 * us + 12e6 / 300e9, 1e-12);
  // 1 KB per rank: LL's latency wins, 7.07 µs + 1024 B at 100 GB/s.
  t = project::collective_time(m, comm::CollectiveKind::gather, 256, 4, {2, 1});
  EXPECT_STREQ(t.protocol, "ll");
  EXPECT_NEAR(t.total_s(), 7.07 * us + 1024 / 100e9, 1e-12);
  // Across two domains: one NIC at the root, min(300, 40) GB/s, the net hop 9.6 µs (Simple).
  const auto m1 = project::testing::nccl_machine(1, 300, 40);
  t = project::collective_time(m1, comm::CollectiveKind::gather, 1'000'000, 4, {2, 2});
  EXPECT_NEAR(t.total_s(), 18.0 * us + 4e6 / 40e9, 1e-12);
  // Nothing moves with one rank or no bytes.
  EXPECT_EQ(project::collective_time(m, comm::CollectiveKind::gather, 1000, 4, {1, 1}).total_s(),
            0);
  EXPECT_EQ(project::collective_time(m, comm::CollectiveKind::gather, 0, 4, {2, 1}).total_s(), 0);
  // The scatter costs what the gather does.
  EXPECT_EQ(
      project::collective_time(m, comm::CollectiveKind::scatter, 1'000'000, 4, {4, 1}).total_s(),
      project::collective_time(m, comm::CollectiveKind::gather, 1'000'000, 4, {4, 1}).total_s());
}

// An all-to-all (expert parallelism's dispatch): each rank's chunks to its own domain on
// NVLink, those to other domains on its NIC, at once; the slower sets the transfer.
TEST(CollectiveCost, AllToAllSplitsItsChunksBetweenNvlinkAndTheNic) {
  const auto m = project::testing::nccl_machine(8, 300, 40);
  // 8 ranks in one domain, 1e6 floats to each: 7 chunks of 4 MB leave on NVLink. Simple:
  // 8.4 + 3.4 µs + 28e6 / 300e9 s.
  auto t = project::collective_time(m, comm::CollectiveKind::all_to_all, 1'000'000, 4, {8, 1});
  EXPECT_STREQ(t.protocol, "simple");
  EXPECT_STREQ(t.algorithm, "p2p");
  EXPECT_NEAR(t.latency_s, 11.8 * us, 1e-12);
  EXPECT_NEAR(t.transfer_s, 28e6 / 300e9, 1e-12);
  // 16 ranks over two domains of 8: 7 chunks on NVLink (28 MB at 300 GB/s, 93 µs) and 8 on the
  // NIC (32 MB at 40 GB/s, 800 µs): the NIC's; the net hop 9.6 µs.
  t = project::collective_time(m, comm::CollectiveKind::all_to_all, 1'000'000, 4, {16, 2});
  EXPECT_NEAR(t.total_s(), 18.0 * us + 32e6 / 40e9, 1e-12);
  // 1 KB to each of 2 ranks: LL's latency wins, 7.07 µs + 1024 B at 100 GB/s.
  t = project::collective_time(m, comm::CollectiveKind::all_to_all, 256, 4, {2, 1});
  EXPECT_STREQ(t.protocol, "ll");
  EXPECT_NEAR(t.total_s(), 7.07 * us + 1024 / 100e9, 1e-12);
  EXPECT_EQ(
      project::collective_time(m, comm::CollectiveKind::all_to_all, 1000, 4, {1, 1}).total_s(), 0);
  // The bus bandwidth convention: S = n · count · e, factor (n − 1)/n.
  EXPECT_DOUBLE_EQ(comm::message_bytes(comm::CollectiveKind::all_to_all, 10, 4, 8), 320.0);
  EXPECT_DOUBLE_EQ(comm::busbw_factor(comm::CollectiveKind::all_to_all, 8), 7.0 / 8);
}

}  // namespace

namespace {

using namespace dmuon;

TEST(CollectiveCost, SerialRootedCallsPayOneLaunchAndEveryHop) {
  // ABatchPaysOneLatencyAndPicksOneProtocol's ten 1 MB broadcasts run one after another inside
  // their launch (the reference's grouped different-root broadcasts): Simple pays its base
  // 8.4 µs once and 7 hops · 3.4 µs = 23.8 µs per call, 246.4 µs + 33.3 µs; LL 6.6 µs once
  // and 7 · 0.47 µs = 3.29 µs per call, 39.5 µs + 10·1e6 / 100e9 s = 139.5 µs: LL wins.
  const auto m = project::testing::nccl_machine(8, 300, 40);
  const std::vector<project::CallSize> ten(10, {comm::CollectiveKind::broadcast, 250'000, 4});
  const auto t = project::batch_time(m, ten, {8, 1}, /*serial_rooted=*/true);
  EXPECT_STREQ(t.protocol, "ll");
  EXPECT_NEAR(t.latency_s, 39.5e-6, 1e-12);
  EXPECT_NEAR(t.transfer_s, 10 * 1e6 / 100e9, 1e-12);
  // An unrooted call keeps the concurrent rule: ten all-gathers pay one latency either way.
  const std::vector<project::CallSize> gathers(10, {comm::CollectiveKind::all_gather, 1000, 4});
  EXPECT_DOUBLE_EQ(project::batch_time(m, gathers, {8, 1}, true).latency_s,
                   project::batch_time(m, gathers, {8, 1}, false).latency_s);
}

}  // namespace
