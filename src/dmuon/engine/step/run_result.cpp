#include "dmuon/engine/step/run_result.hpp"

#include <cmath>
#include <limits>

#include "dmuon/comm/bus_bandwidth.hpp"

namespace dmuon::engine {

const char* memory_term_name(MemoryTerm t) {
  switch (t) {
    case MemoryTerm::masters: return "masters";
    case MemoryTerm::optimizer_state: return "optimizer_state";
    case MemoryTerm::gradients: return "gradients";
    case MemoryTerm::ns_input: return "ns_input";
    case MemoryTerm::weights: return "weights";
    case MemoryTerm::grad_buffers: return "grad_buffers";
    case MemoryTerm::gather_buffers: return "gather_buffers";
    case MemoryTerm::ns_workspace: return "ns_workspace";
    case MemoryTerm::tp_buffers: return "tp_buffers";
  }
  return "?";
}

std::string channel_name(std::size_t channel) {
  const std::string kind = comm::collective_kind_name(channel_kind(channel));
  const CommGroup g = channel_group(channel);
  return g == CommGroup::shard ? kind : comm_group_name(g) + ("_" + kind);
}

bool parse_channel_name(const std::string& name, std::size_t& channel) {
  for (std::size_t c = 0; c < kChannelCount; ++c)
    if (channel_name(c) == name) {
      channel = c;
      return true;
    }
  return false;
}

double KindResult::algbw_gbps() const {
  if (!(in_flight_ms > 0) || message_bytes <= 0) return std::numeric_limits<double>::quiet_NaN();
  return message_bytes / (in_flight_ms * 1e-3) / 1e9;
}

double KindResult::busbw_gbps(comm::CollectiveKind kind) const {
  return algbw_gbps() * comm::busbw_factor(kind, group_size);
}

std::int64_t RunResult::bytes_measured_total() const {
  std::int64_t t = 0;
  for (const auto& k : kinds) t += k.bytes_measured;
  return t;
}

std::int64_t RunResult::bytes_formula_total() const {
  std::int64_t t = 0;
  for (const auto& k : kinds) t += k.bytes_formula;
  return t;
}

}  // namespace dmuon::engine
