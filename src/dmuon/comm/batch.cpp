#include "dmuon/comm/batch.hpp"

#include <exception>

namespace dmuon::comm {

Batch& Batch::operator=(Batch&& other) {
  if (this != &other) {
    wait();
    state_ = std::move(other.state_);
  }
  return *this;
}

Batch::~Batch() {
  if (!state_ || std::uncaught_exceptions() > 0) return;
  try {
    state_->wait();
  } catch (...) {
    // A destructor must not throw; a failed wait here means the communicator is broken and
    // the next collective will report it with the failing call's name.
  }
}

void Batch::wait() {
  if (!state_) return;
  state_->wait();
  state_.reset();
}

void Batch::wait_on_stream(void* stream, bool consume) {
  if (!state_) return;
  state_->enqueue_wait(stream);
  if (consume) state_.reset();
}

bool Batch::ready() {
  if (!state_) return true;
  if (!state_->test()) return false;
  state_.reset();
  return true;
}

}  // namespace dmuon::comm
