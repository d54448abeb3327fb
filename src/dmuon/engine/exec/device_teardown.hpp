#pragma once
// How a device backend ends. Normally: synchronise the device, then release. After a failure
// mid-step: abort every communicator FIRST and never synchronise, because a rank whose peers
// stopped (or that stopped first) has NCCL kernels that wait for them forever, and a
// synchronisation there hangs the rank without a word while the others time out minutes later.
// Kept apart from the CUDA backend so the order is tested on the host with fake communicators.

#include <functional>
#include <vector>

#include "dmuon/comm/communicator.hpp"

namespace dmuon::engine {

class DeviceTeardown {
 public:
  /// `synchronize` waits for the device's queued work (the CUDA backend: cudaDeviceSynchronize).
  explicit DeviceTeardown(std::function<void()> synchronize)
      : synchronize_(std::move(synchronize)) {}

  /// A communicator abort() must reach; null is ignored. It must outlive finish().
  void track(comm::Communicator* c) {
    if (c != nullptr) comms_.push_back(c);
  }
  /// Aborts every tracked communicator, in the order tracked, before anything synchronises.
  /// Idempotent.
  void abort() noexcept;
  bool aborted() const { return aborted_; }
  /// The destructor's path: synchronises unless abort() ran. Never throws.
  void finish() noexcept;

 private:
  std::function<void()> synchronize_;
  std::vector<comm::Communicator*> comms_;
  bool aborted_ = false;
};

}  // namespace dmuon::engine
