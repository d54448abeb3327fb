// Bandwidth bookkeeping against hand-computed answers: nccl-tests' message sizes and bus
// factors, and the union of in-flight intervals that the engine divides bytes by.

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "dmuon/comm/bus_bandwidth.hpp"
#include "dmuon/engine/exec/in_flight_clock.hpp"

namespace {

using dmuon::comm::CollectiveKind;

TEST(BusBandwidth, FactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(dmuon::comm::busbw_factor(CollectiveKind::all_reduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(dmuon::comm::busbw_factor(CollectiveKind::all_gather, 4), 0.75);
  EXPECT_DOUBLE_EQ(dmuon::comm::busbw_factor(CollectiveKind::reduce_scatter, 2), 0.5);
  EXPECT_DOUBLE_EQ(dmuon::comm::busbw_factor(CollectiveKind::broadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(dmuon::comm::busbw_factor(CollectiveKind::reduce, 3), 1.0);
  EXPECT_DOUBLE_EQ(dmuon::comm::busbw_factor(CollectiveKind::all_reduce, 1), 0.0);
}

TEST(BusBandwidth, MessageBytesAreTheFullBufferForGatherAndScatter) {
  // 1000 bf16 elements per rank over 4 ranks: the gathered buffer is 8000 bytes.
  EXPECT_DOUBLE_EQ(dmuon::comm::message_bytes(CollectiveKind::all_gather, 1000, 2, 4), 8000);
  EXPECT_DOUBLE_EQ(dmuon::comm::message_bytes(CollectiveKind::reduce_scatter, 1000, 4, 4), 16000);
  EXPECT_DOUBLE_EQ(dmuon::comm::message_bytes(CollectiveKind::broadcast, 1000, 4, 4), 4000);
  EXPECT_DOUBLE_EQ(dmuon::comm::message_bytes(CollectiveKind::all_reduce, 3, 4, 64), 12);
}

TEST(InFlightClock, UnionCountsOverlapOnce) {
  std::vector<std::pair<double, double>> v = {{5, 7}, {0, 2}, {1, 3}, {6, 6.5}, {10, 10}};
  // [0,3) ∪ [5,7) = 3 + 2; the empty [10,10) adds nothing.
  EXPECT_DOUBLE_EQ(dmuon::engine::union_length(v), 5.0);
  std::vector<std::pair<double, double>> touching = {{0, 1}, {1, 2}, {2, 4}};
  EXPECT_DOUBLE_EQ(dmuon::engine::union_length(touching), 4.0);
  std::vector<std::pair<double, double>> none;
  EXPECT_DOUBLE_EQ(dmuon::engine::union_length(none), 0.0);
}

TEST(InFlightClock, ChannelsOfABatchAndUnknownKeys) {
  dmuon::engine::InFlightClock clock;
  clock.start_step();
  int a = 0, b = 0;
  clock.open(&a, 0b101);  // channels 0 and 2
  clock.open(&b, 0b001);
  clock.close(&b);
  clock.close(&b);  // already closed: no-op
  clock.close(&a);
  const auto ms = clock.finish_step();
  EXPECT_GE(ms[0], 0.0);
  EXPECT_GE(ms[2], 0.0);
  EXPECT_EQ(ms[1], 0.0);  // nothing ran on channel 1
  // Channel 0's union covers a's interval, which contains b's.
  EXPECT_GE(ms[0], ms[2] - 1e-12);
  EXPECT_LE(ms[0], ms[2] + 1e-12);
}

}  // namespace
