#pragma once
// A stage's end of the pipeline's boundaries on the host (--pp, step/pipeline_order.hpp): the
// sends and receives of one micro-batch's activations and of their gradients with the
// neighbouring stages, over the pipeline group (MPI, host memory). The engine computes no
// real activations (the activation work runs on scratch; each stage's gradients are its own
// synthetic ones), so a message holds its identity instead: every element is the micro-
// batch's number, negative for gradients. A receive checks it, so a stage that sent or
// received out of the 1F1B order ends the run naming both rather than passing silently.
// Sends stay in flight until finish_step (one buffer per micro-batch and direction sent).

#include <cstdint>
#include <vector>

#include "dmuon/comm/batch.hpp"
#include "dmuon/comm/communicator.hpp"
#include "dmuon/engine/step/pipeline_order.hpp"
#include "dmuon/engine/step/step_op.hpp"

namespace dmuon::engine {

class PipelineLink {
 public:
  /// `pipeline`: this rank's pipeline group (member s = stage s); its buffers for
  /// `micro_batches` micro-batches (validate bounds them: pipeline_buffer_bytes).
  PipelineLink(comm::Communicator& pipeline, const PipelineStages& stages, int micro_batches);

  /// Runs a pp_* op of micro-batch op.micro: a send is posted, a receive waited and checked
  /// (RuntimeFailure when its message is not the one the order expects).
  void run(const StepOp& op);
  /// Completes the step's sends.
  void finish_step();
  std::int64_t bytes() const;

 private:
  float* send_slot(bool gradients, int micro);

  comm::Communicator& comm_;
  PipelineStages p_;
  std::size_t n_ = 0;  // elements per message
  std::vector<float> activations_out_, gradients_out_, in_;
  std::vector<comm::Batch> sends_;
};

}  // namespace dmuon::engine
