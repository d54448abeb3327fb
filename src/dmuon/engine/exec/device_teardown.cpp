#include "dmuon/engine/exec/device_teardown.hpp"

namespace dmuon::engine {

void DeviceTeardown::abort() noexcept {
  if (aborted_) return;
  aborted_ = true;
  for (comm::Communicator* c : comms_) c->abort();
}

void DeviceTeardown::finish() noexcept {
  if (aborted_ || !synchronize_) return;
  try {
    synchronize_();
  } catch (...) {
    // A destructor's synchronisation failing leaves nothing to do but release.
  }
}

}  // namespace dmuon::engine
