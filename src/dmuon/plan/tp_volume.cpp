#include "dmuon/plan/tp_volume.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "dmuon/base/checked_int.hpp"

namespace dmuon::plan {

std::int64_t TpCommVolume::total_bytes(int world_rank) const {
  const auto w = static_cast<std::size_t>(world_rank);
  const auto overflow = [&] {
    return fmt::format("predicted volume of rank {} per step overflows 64 bits", world_rank);
  };
  return checked_add(
      checked_add(dp.total_bytes(world_rank / tp), gather.bytes_per_rank.at(w), overflow),
      scatter.bytes_per_rank.at(w), overflow);
}

std::int64_t TpCommVolume::max_bytes_per_rank() const {
  std::int64_t m = 0;
  for (int w = 0; w < world; ++w) m = std::max(m, total_bytes(w));
  return m;
}

std::string tp_volume_mismatch(const TpCommVolume& v, int rank, const comm::KindCounters& gather,
                               const comm::KindCounters& scatter) {
  const auto w = static_cast<std::size_t>(rank);
  const auto u = [](std::int64_t x) { return static_cast<std::uint64_t>(x); };
  const auto mismatch = [](const char* what, std::uint64_t measured, std::uint64_t formula) {
    return fmt::format("{}: measured {}, formula {}", what, measured, formula);
  };
  if (gather.calls != u(v.gather.calls_per_rank.at(w)))
    return mismatch("tp_gather calls", gather.calls, u(v.gather.calls_per_rank[w]));
  if (gather.bytes_sent != u(v.gather.bytes_per_rank.at(w)))
    return mismatch("tp_gather bytes sent", gather.bytes_sent, u(v.gather.bytes_per_rank[w]));
  if (gather.bytes_received != u(v.gather_received.at(w)))
    return mismatch("tp_gather bytes received", gather.bytes_received, u(v.gather_received[w]));
  if (scatter.calls != u(v.scatter.calls_per_rank.at(w)))
    return mismatch("tp_scatter calls", scatter.calls, u(v.scatter.calls_per_rank[w]));
  if (scatter.bytes_received != u(v.scatter.bytes_per_rank.at(w)))
    return mismatch("tp_scatter bytes received", scatter.bytes_received,
                    u(v.scatter.bytes_per_rank[w]));
  if (scatter.bytes_sent != u(v.scatter_sent.at(w)))
    return mismatch("tp_scatter bytes sent", scatter.bytes_sent, u(v.scatter_sent[w]));
  return std::string();
}

}  // namespace dmuon::plan
