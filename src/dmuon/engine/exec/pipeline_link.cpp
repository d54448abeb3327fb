#include "dmuon/engine/exec/pipeline_link.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "dmuon/base/error.hpp"

namespace dmuon::engine {
namespace {

// A message's identity: micro-batch m's activations m + 1, their gradients −(m + 1).
float message_tag(bool gradients, int micro) {
  const float m = static_cast<float>(micro + 1);
  return gradients ? -m : m;
}

std::string describe(float tag) {
  if (tag == 0) return "an unmarked message";
  const int micro = static_cast<int>(tag < 0 ? -tag : tag) - 1;
  return fmt::format("micro-batch {}'s {}", micro, tag < 0 ? "gradients" : "activations");
}

}  // namespace

PipelineLink::PipelineLink(comm::Communicator& pipeline, const PipelineStages& stages,
                           int micro_batches)
    : comm_(pipeline), p_(stages), n_(static_cast<std::size_t>(stages.message_elems)) {
  if (comm_.size() != p_.count || comm_.rank() != p_.stage)
    throw std::logic_error(fmt::format("PipelineLink: stage {} of {} on a pipeline group of {}",
                                       p_.stage, p_.count, comm_.size()));
  // Sized within bounds by validate (pipeline_buffer_bytes), on every stage alike.
  const auto out = static_cast<std::size_t>(micro_batches) * n_;
  if (p_.has_next()) activations_out_.resize(out);
  if (p_.has_previous()) gradients_out_.resize(out);
  in_.resize(n_);
}

float* PipelineLink::send_slot(bool gradients, int micro) {
  auto& buffer = gradients ? gradients_out_ : activations_out_;
  const std::size_t at = static_cast<std::size_t>(micro) * n_;
  if (at + n_ > buffer.size())
    throw std::logic_error(fmt::format("PipelineLink: no send buffer for micro-batch {}", micro));
  return buffer.data() + at;
}

void PipelineLink::run(const StepOp& op) {
  const bool gradients = op.op == Op::pp_send_gradients || op.op == Op::pp_recv_gradients;
  const bool send = op.op == Op::pp_send_activations || op.op == Op::pp_send_gradients;
  if (!send && op.op != Op::pp_recv_activations && op.op != Op::pp_recv_gradients)
    throw std::logic_error(fmt::format("PipelineLink: {} is not a pipeline op", op_name(op.op)));
  // Activations flow to the next stage, gradients to the previous one.
  const int peer = p_.stage + ((gradients == send) ? -1 : 1);
  const float tag = message_tag(gradients, op.micro);
  if (send) {
    float* slot = send_slot(gradients, op.micro);
    std::fill(slot, slot + n_, tag);
    comm_.group_start();
    comm_.send(slot, n_, comm::DType::f32, peer);
    sends_.push_back(comm_.group_end());
    return;
  }
  std::fill(in_.begin(), in_.end(), 0.0f);
  comm_.group_start();
  comm_.recv(in_.data(), n_, comm::DType::f32, peer);
  comm_.group_end().wait();
  if (in_.front() != tag || in_.back() != tag)
    throw RuntimeFailure(fmt::format(
        "pipeline stage {}: received {} from stage {} where the 1F1B order expects {}", p_.stage,
        describe(in_.front() != tag ? in_.front() : in_.back()), peer, describe(tag)));
}

void PipelineLink::finish_step() {
  for (auto& b : sends_) b.wait();
  sends_.clear();
}

std::int64_t PipelineLink::bytes() const {
  return static_cast<std::int64_t>((activations_out_.size() + gradients_out_.size() + in_.size()) *
                                   sizeof(float));
}

}  // namespace dmuon::engine
