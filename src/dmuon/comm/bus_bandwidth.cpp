#include "dmuon/comm/bus_bandwidth.hpp"

namespace dmuon::comm {

double busbw_factor(CollectiveKind kind, int n) {
  if (n <= 1) return 0;
  switch (kind) {
    case CollectiveKind::all_reduce: return 2.0 * (n - 1) / n;
    case CollectiveKind::all_gather:
    case CollectiveKind::reduce_scatter:
    case CollectiveKind::gather:
    case CollectiveKind::scatter:
    case CollectiveKind::all_to_all: return static_cast<double>(n - 1) / n;
    case CollectiveKind::broadcast:
    case CollectiveKind::reduce:
    case CollectiveKind::send_recv: return 1.0;
  }
  return 1.0;
}

double message_bytes(CollectiveKind kind, std::int64_t count, std::size_t elem_bytes, int n) {
  const double s = static_cast<double>(count) * static_cast<double>(elem_bytes);
  const bool chunked = kind == CollectiveKind::all_gather ||
                       kind == CollectiveKind::reduce_scatter || kind == CollectiveKind::gather ||
                       kind == CollectiveKind::scatter || kind == CollectiveKind::all_to_all;
  return chunked ? s * n : s;
}

}  // namespace dmuon::comm
