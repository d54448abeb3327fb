#include "dmuon/engine/run_result.hpp"

#include <cmath>
#include <limits>

#include "dmuon/comm/bus_bandwidth.hpp"

namespace dmuon::engine {

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::forward_comm: return "forward_comm";
    case Phase::forward_compute: return "forward_compute";
    case Phase::backward_compute: return "backward_compute";
    case Phase::backward_comm: return "backward_comm";
    case Phase::optimizer_ns: return "optimizer_ns";
    case Phase::optimizer_other: return "optimizer_other";
    case Phase::exposed_comm: return "exposed_comm";
    case Phase::step: return "step";
    case Phase::step_sync: return "step_sync";
  }
  return "?";
}

std::string channel_name(std::size_t channel) {
  const std::string kind = comm::collective_kind_name(channel_kind(channel));
  switch (channel_group(channel)) {
    case CommGroup::shard: return kind;
    case CommGroup::replicate: return "replicate_" + kind;
    case CommGroup::world: return "world_" + kind;
    case CommGroup::tp: return "tp_" + kind;
  }
  return kind;
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
