#pragma once
// Pipeline stages in the engine (--pp P, docs/ARCHITECTURE.md "Pipeline stages"): the world's
// ranks as P stages of world/P ranks each, stage-major (stage s holds world ranks s·S …
// s·S + S − 1, S = world/P; Megatron orders pipeline parallelism outermost), each stage a
// world of its own running the step of its blocks (model/pipeline_stage.hpp); the rank at the
// same place in each stage forms a pipeline group (CommGroup::pipeline). A stage runs its
// micro-batches in the 1F1B order of torch.distributed.pipelining's Schedule1F1B (PipeDream-
// flush): stage s of P first runs min(P − s − 1, m) forwards, then alternates one forward and
// one backward, then runs the backwards left. Before a forward a stage s > 0 receives the
// micro-batch's activations from stage s − 1, after it a stage s < P − 1 sends its output to
// stage s + 1; backward the same with the activations' gradients in the other direction. Sends
// are left in flight until the step's end (torch posts them asynchronously), receives wait.

#include <cstdint>
#include <vector>

namespace dmuon::engine {

/// The pipeline a rank's step belongs to (StepSpec::stages).
struct PipelineStages {
  int count = 1;  ///< P (1: no pipeline)
  int stage = 0;  ///< this rank's, 0..P−1
  /// Runs of the schedule per step (--pp-microbatches: the micro-batches in runs of m/runs,
  /// each filling and draining the pipeline, the gradients accumulated over all).
  int runs = 1;
  /// One micro-batch's activations (or their gradients) across a stage boundary, fp32
  /// elements: micro-batch × sequence × hidden.
  std::int64_t message_elems = 0;

  bool active() const { return count > 1; }
  bool has_previous() const { return stage > 0; }
  bool has_next() const { return stage + 1 < count; }
};

/// One forward or backward of one micro-batch on a stage.
struct PipelinePass {
  bool forward = true;
  int micro = 0;
  bool operator==(const PipelinePass& o) const { return forward == o.forward && micro == o.micro; }
};

/// Stage `stage` of `stages`'s passes over `micro_batches` micro-batches in `runs` runs of the
/// 1F1B schedule (see above); the backwards come in micro-batch order. std::logic_error for
/// values outside 0 <= stage < stages, runs dividing micro_batches.
std::vector<PipelinePass> one_f_one_b(int stages, int stage, int micro_batches, int runs = 1);

/// This world rank's stage when `world_size` ranks form `stages` stages (stage-major), and its
/// place inside the stage (its rank in the stage's world and its pipeline group's instance).
int pipeline_stage_of(int world_rank, int world_size, int stages);

/// Micro-batches whose forward has run and backward not, at most, on a stage (1F1B: its
/// warm-up forwards and one, min(P − s, m/runs); 1 without stages): each keeps its activations.
int in_flight_micro_batches(const PipelineStages& p, int micro_batches);

/// The host buffers of an inner stage's boundaries (the most any stage holds): a message per
/// micro-batch each way sent, one received, fp32.
double pipeline_buffer_bytes(const PipelineStages& p, int micro_batches);

/// What a stage's sends and receives move per step (the pipeline channel's audit): calls on
/// this rank (each send and each receive one) and bytes it sends, fp32 messages.
struct PipelineTraffic {
  std::int64_t calls = 0;
  std::int64_t bytes = 0;
};
PipelineTraffic pipeline_traffic_per_step(const PipelineStages& p, int micro_batches);

}  // namespace dmuon::engine
