// The composed pipeline step and the activations in flight (project/pipeline_schedule.hpp),
// against hand-computed schedules.

#include <gtest/gtest.h>

#include <vector>

#include "dmuon/project/pipeline_schedule.hpp"

namespace {

using namespace dmuon::project;

TEST(PipelineSchedule, EqualStagesWaitTheirBubble) {
  // 4 stages of 10 ms per micro-batch, 8 micro-batches: (8 + 3) · 10 = 110 ms of span, each
  // stage 80 ms busy, so 30 ms idle on top of its own 100 ms step.
  const std::vector<StageTime> four(4, StageTime{100, 80});
  const auto t = pipeline_time({4, 1, 8}, four, 0);
  EXPECT_DOUBLE_EQ(t.span_ms, 110);
  EXPECT_DOUBLE_EQ(t.step_ms, 130);
  for (double b : t.bubble_ms) EXPECT_DOUBLE_EQ(b, 30);
  // Interleaved with 2 chunks per rank: the fill in half-chunks, (8 + 3/2) · 10.
  EXPECT_DOUBLE_EQ(pipeline_time({4, 2, 8}, four, 0).span_ms, 95);
  // The fill and drain's 2 (P·v − 1) sends: 6 of 1 ms.
  EXPECT_DOUBLE_EQ(pipeline_time({4, 1, 8}, four, 1).step_ms, 136);
  // One stage: no bubble.
  const auto one = pipeline_time({1, 1, 8}, {StageTime{100, 80}}, 5);
  EXPECT_DOUBLE_EQ(one.step_ms, 100);
}

TEST(PipelineSchedule, TheSlowestStagePacesTheSteadyState) {
  // Stage 3 twice as slow (a head): span = 10 + 10 + 10 + 8 · 20 = 190; the others idle 110,
  // stage 3 30; every stage's step 210, the first of them critical.
  const std::vector<StageTime> s = {{100, 80}, {100, 80}, {100, 80}, {180, 160}};
  const auto t = pipeline_time({4, 1, 8}, s, 0);
  EXPECT_DOUBLE_EQ(t.span_ms, 190);
  EXPECT_EQ(t.bubble_ms, (std::vector<double>{110, 110, 110, 30}));
  EXPECT_DOUBLE_EQ(t.step_ms, 210);
  EXPECT_EQ(t.critical, 0);
  // A stage with more exposed communication or optimizer after it is the critical one.
  const std::vector<StageTime> tail = {{100, 80}, {100, 80}, {150, 80}, {100, 80}};
  EXPECT_EQ(pipeline_time({4, 1, 8}, tail, 0).critical, 2);
}

TEST(PipelineSchedule, ActivationsInFlight) {
  // 1F1B: stage p holds P − p micro-batches (at most m).
  EXPECT_DOUBLE_EQ(in_flight({4, 1, 8}, 0), 4);
  EXPECT_DOUBLE_EQ(in_flight({4, 1, 8}, 3), 1);
  EXPECT_DOUBLE_EQ(in_flight({4, 1, 2}, 0), 2);
  // Interleaved, 4 ranks x 2 chunks: rank 0 warms up 3·2 + 1·4 = 10 chunks, holds 11 halves;
  // rank 3 holds 4 + 1 = 5 halves; at most m·v chunks.
  EXPECT_DOUBLE_EQ(in_flight({4, 2, 8}, 0), 5.5);
  EXPECT_DOUBLE_EQ(in_flight({4, 2, 8}, 3), 2.5);
  EXPECT_DOUBLE_EQ(in_flight({4, 2, 2}, 0), 2);
}

TEST(PipelineSchedule, EveryRunOfTheScheduleFillsAndDrains) {
  // The 8 micro-batches in 2 runs of 4 (gradient accumulation over runs): each run fills and
  // drains, 2 · 3 · 10 + 8 · 10 = 140 ms of span (one run: 110), 60 ms idle per stage.
  const std::vector<StageTime> four(4, StageTime{100, 80});
  const auto t = pipeline_time({4, 1, 8, 2}, four, 0);
  EXPECT_DOUBLE_EQ(t.span_ms, 140);
  EXPECT_DOUBLE_EQ(t.step_ms, 160);
  // Interleaved by 2 with 1 ms sends: each run 3/2 · 10 + 2 (4·2 − 1) · 1 = 29, twice, + 80.
  EXPECT_DOUBLE_EQ(pipeline_time({4, 2, 8, 2}, four, 1).span_ms, 138);
  // 8 runs of 1 micro-batch: no overlap at all, every micro-batch through the 4 stages alone.
  EXPECT_DOUBLE_EQ(pipeline_time({4, 1, 8, 8}, four, 0).span_ms, 8 * 40);
  // Activations: a run's micro-batches only (1F1B stage 0 holds min(4, P) of a run of 4, 2 of
  // a run of 2).
  EXPECT_DOUBLE_EQ(in_flight({4, 1, 8, 2}, 0), 4);
  EXPECT_DOUBLE_EQ(in_flight({4, 1, 8, 4}, 0), 2);
  EXPECT_DOUBLE_EQ(in_flight({4, 2, 8, 4}, 0), 2);
  EXPECT_THROW(pipeline_time({4, 1, 8, 3}, four, 0), std::logic_error);
}

}  // namespace
