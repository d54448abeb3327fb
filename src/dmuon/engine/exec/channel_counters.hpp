#pragma once
// A rank's collective counters on every communicator of a step at one moment: the difference
// of two snapshots is what a step moved on each channel (run_result.hpp).

#include <array>

#include "dmuon/comm/collective_counters.hpp"
#include "dmuon/engine/exec/step_backend.hpp"

namespace dmuon::engine {

/// Per communicator (CommGroup); a communicator this rank lacks counts nothing.
using ChannelCounters = std::array<comm::CollectiveCounters, kCommGroupCount>;

ChannelCounters channel_counters(StepBackend& backend);
/// Group-wise difference of a later snapshot and an earlier one.
ChannelCounters operator-(const ChannelCounters& later, const ChannelCounters& earlier);

}  // namespace dmuon::engine
