// The engine's 1F1B order (engine/step/pipeline_order.hpp), written out by hand from the
// schedule's definition: stage s of P warms up with min(P − s − 1, m) forwards, then one
// forward and one backward alternate, then the backwards left; runs each start afresh.

#include "dmuon/engine/step/pipeline_order.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace {

using namespace dmuon::engine;

std::string text(const std::vector<PipelinePass>& passes) {
  std::string out;
  for (const auto& p : passes) out += (p.forward ? "F" : "B") + std::to_string(p.micro) + " ";
  return out;
}

TEST(OneFOneB, FourStagesFourMicroBatches) {
  EXPECT_EQ(text(one_f_one_b(4, 0, 4)), "F0 F1 F2 F3 B0 B1 B2 B3 ");
  EXPECT_EQ(text(one_f_one_b(4, 1, 4)), "F0 F1 F2 B0 F3 B1 B2 B3 ");
  EXPECT_EQ(text(one_f_one_b(4, 2, 4)), "F0 F1 B0 F2 B1 F3 B2 B3 ");
  EXPECT_EQ(text(one_f_one_b(4, 3, 4)), "F0 B0 F1 B1 F2 B2 F3 B3 ");
}

TEST(OneFOneB, FewerMicroBatchesThanStages) {
  EXPECT_EQ(text(one_f_one_b(4, 0, 2)), "F0 F1 B0 B1 ");
  EXPECT_EQ(text(one_f_one_b(4, 2, 2)), "F0 F1 B0 B1 ");
  EXPECT_EQ(text(one_f_one_b(4, 3, 2)), "F0 B0 F1 B1 ");
  EXPECT_EQ(text(one_f_one_b(1, 0, 2)), "F0 B0 F1 B1 ");
}

TEST(OneFOneB, RunsFillAndDrainEach) {
  EXPECT_EQ(text(one_f_one_b(2, 0, 4, 2)), "F0 F1 B0 B1 F2 F3 B2 B3 ");
  EXPECT_EQ(text(one_f_one_b(2, 1, 4, 2)), "F0 B0 F1 B1 F2 B2 F3 B3 ");
}

TEST(OneFOneB, RefusesWhatIsNoSchedule) {
  EXPECT_THROW(one_f_one_b(2, 2, 4), std::logic_error);
  EXPECT_THROW(one_f_one_b(2, 0, 4, 3), std::logic_error);
  EXPECT_THROW(one_f_one_b(0, 0, 1), std::logic_error);
}

TEST(PipelineStages, StageMajorPlaces) {
  EXPECT_EQ(pipeline_stage_of(0, 8, 2), 0);
  EXPECT_EQ(pipeline_stage_of(3, 8, 2), 0);
  EXPECT_EQ(pipeline_stage_of(4, 8, 2), 1);
  EXPECT_EQ(pipeline_stage_of(7, 8, 4), 3);
  EXPECT_THROW(pipeline_stage_of(0, 6, 4), std::logic_error);
}

// Per neighbour and micro-batch a send and a receive; one message sent.
TEST(PipelineStages, TrafficByHand) {
  PipelineStages p{3, 0, 1, 100};
  EXPECT_EQ(pipeline_traffic_per_step(p, 4).calls, 8);
  EXPECT_EQ(pipeline_traffic_per_step(p, 4).bytes, 4 * 100 * 4);
  p.stage = 1;
  EXPECT_EQ(pipeline_traffic_per_step(p, 4).calls, 16);
  EXPECT_EQ(pipeline_traffic_per_step(p, 4).bytes, 2 * 4 * 100 * 4);
  EXPECT_EQ(pipeline_traffic_per_step(PipelineStages{}, 4).calls, 0);
}

// 1F1B keeps a stage's warm-up forwards and one in flight: min(P − s, m/runs).
TEST(PipelineStages, MicroBatchesInFlight) {
  EXPECT_EQ(in_flight_micro_batches(PipelineStages{}, 8), 1);
  EXPECT_EQ(in_flight_micro_batches(PipelineStages{4, 0, 1, 1}, 8), 4);
  EXPECT_EQ(in_flight_micro_batches(PipelineStages{4, 3, 1, 1}, 8), 1);
  EXPECT_EQ(in_flight_micro_batches(PipelineStages{4, 0, 1, 1}, 2), 2);
  EXPECT_EQ(in_flight_micro_batches(PipelineStages{4, 1, 4, 1}, 8), 2);
}

// The host buffers an inner stage holds: m messages sent each way and one received.
TEST(PipelineStages, BufferBytesByHand) {
  EXPECT_EQ(pipeline_buffer_bytes(PipelineStages{2, 0, 1, 100}, 4), 4.0 * (2 * 4 * 100 + 100));
}

}  // namespace
