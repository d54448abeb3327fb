#pragma once
// Per channel (communicator group × collective kind), the wall time of a step during which at
// least one collective of that channel was in flight: from its batch's issue to the moment the
// host saw it complete (a wait returned, or a progress poll found it done). Overlapping batches
// of one channel count once (the union of their intervals), so bytes ÷ this time is the
// bandwidth the channel achieved while it was busy — the engine's algbw in the nccl-tests sense
// (comm/bus_bandwidth.hpp). Completion is observed at the executor's polling granularity, so the
// time is an upper bound and the bandwidth a lower bound. Only meaningful where the host sees
// completion (MPI); a CUDA backend's waits are stream orderings and are not timed this way.

#include <array>
#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

#include "dmuon/engine/step/run_result.hpp"

namespace dmuon::engine {

class InFlightClock {
 public:
  using Clock = std::chrono::steady_clock;

  /// The step's time origin; batches still open from the previous step (HSDP replicate
  /// broadcasts) count from here.
  void start_step();
  /// A batch identified by `key` went in flight on the channels of `channel_mask`
  /// (bit channel_index()). Re-opening an open key closes it first.
  void open(const void* key, std::uint64_t channel_mask);
  static_assert(kChannelCount <= 64, "a channel mask is one 64-bit word");
  /// The batch `key` was seen complete (no-op if it is not open).
  void close(const void* key);
  /// Milliseconds per channel for the step just ended; open batches are cut here and stay open.
  std::array<double, kChannelCount> finish_step();

 private:
  double now_ms() const;

  struct OpenBatch {
    const void* key = nullptr;
    std::uint64_t mask = 0;
    double since_ms = 0;
  };
  Clock::time_point origin_{};
  std::vector<OpenBatch> open_;
  std::array<std::vector<std::pair<double, double>>, kChannelCount> intervals_;
};

/// Total length of the union of [begin, end) intervals (sorted in place).
double union_length(std::vector<std::pair<double, double>>& intervals);

}  // namespace dmuon::engine
