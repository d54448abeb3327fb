#include "dmuon/engine/exec/channel_counters.hpp"

namespace dmuon::engine {

ChannelCounters channel_counters(StepBackend& backend) {
  ChannelCounters c{};
  for (CommGroup g : kAllCommGroups)
    if (const comm::Communicator* comm = backend.comm(g))
      c[static_cast<std::size_t>(g)] = comm->counters();
  return c;
}

ChannelCounters operator-(const ChannelCounters& later, const ChannelCounters& earlier) {
  ChannelCounters d{};
  for (std::size_t g = 0; g < d.size(); ++g) d[g] = later[g] - earlier[g];
  return d;
}

}  // namespace dmuon::engine
