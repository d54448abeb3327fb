#pragma once
// A pipeline-parallel step composed from its stages' projected steps (--pp P, docs/
// PROJECTION.md "Pipeline parallelism"), for the schedules torchtitan runs
// (torch.distributed.pipelining): 1F1B and interleaved 1F1B with v chunks per rank.
//
// Each stage is projected alone as its own FSDP / DMuon world running the step's m
// micro-batches back to back (`step_ms`, of which `compute_ms` is forward and backward
// compute). In the pipeline a micro-batch passes every stage, so stage p also waits:
//
//   c_p = compute_ms_p / m                     one micro-batch's forward + backward
//   M   = (Σ_q c_q − c_max) / v + m · c_max    the pipeline's compute span (1F1B: the fill and
//         + 2 (P·v − 1) · t_send               drain of one micro-batch through the others,
//                                              then m at the slowest stage; interleaved: the
//                                              fill in chunks of 1/v), plus the activation and
//                                              gradient sends on that fill and drain path
//   bubble_p = M − m · c_p,  step = max_p (step_ms_p + bubble_p)
//
// For P equal stages this is (m + (P − 1)/v) c: the bubble (P − 1)/(m·v) of the work
// (PUBLIC-THROUGHPUT.md §8). With the m micro-batches in r runs of the schedule (gradient
// accumulation over runs, --pp-microbatches m/r) each run fills and drains:
//   M = r ((Σ_q c_q − c_max) / v + 2 (P·v − 1) · t_send) + m · c_max. A stage's optimizer and its
//   gradients' last reduce follow its
// last backward as projected; sends in the steady state are taken as overlapped (torch posts
// them asynchronously).
//
// Memory: at its peak stage p holds the saved activations of in_flight(p) micro-batches
// (1F1B: min(n, P − p); interleaved: its warm-up chunks plus one, (P − p − 1)·2 + (v − 1)·P
// + 1, each 1/v of its micro-batch's activations, at most n·v), n = m/r those of one run.

#include <vector>

namespace dmuon::project {

struct PipelineShape {
  int stages = 1;         ///< P
  int chunks = 1;         ///< v (1: 1F1B)
  int micro_batches = 1;  ///< m (--accum)
  int runs = 1;           ///< r: runs of the schedule per step, m/r micro-batches each
  /// n = m / r, the micro-batches of one run.
  int run_micro_batches() const { return micro_batches / runs; }
};

/// Micro-batches' worth of saved activations rank `stage` holds at its peak (see above).
double in_flight(const PipelineShape& s, int stage);

struct StageTime {
  double step_ms = 0;     ///< the stage projected alone (m micro-batches back to back)
  double compute_ms = 0;  ///< of which forward and backward compute, all micro-batches
};

struct PipelineTime {
  double step_ms = 0;
  double span_ms = 0;  ///< M
  int critical = 0;    ///< the stage whose step_ms + bubble is the step
  std::vector<double> bubble_ms;
};

/// The composed step (see above); `send_ms`: one boundary transfer of a micro-batch's
/// activations (its gradients' is the same size).
PipelineTime pipeline_time(const PipelineShape& s, const std::vector<StageTime>& stages,
                           double send_ms);

}  // namespace dmuon::project
