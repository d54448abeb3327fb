#include "dmuon/comm/collective_counters.hpp"

#include <fmt/format.h>

#include <vector>

#include "dmuon/base/check.hpp"

namespace dmuon::comm {

const char* collective_kind_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::broadcast: return "broadcast";
    case CollectiveKind::reduce: return "reduce";
    case CollectiveKind::reduce_scatter: return "reduce_scatter";
    case CollectiveKind::all_gather: return "all_gather";
    case CollectiveKind::all_reduce: return "all_reduce";
    case CollectiveKind::gather: return "gather";
    case CollectiveKind::scatter: return "scatter";
    case CollectiveKind::all_to_all: return "all_to_all";
    case CollectiveKind::send_recv: return "send_recv";
  }
  return "?";
}

KindCounters collective_payload(CollectiveKind kind, int group_size, bool is_root,
                                std::size_t count, std::size_t elem_bytes) {
  DMUON_REQUIRE(group_size >= 1,
                fmt::format("collective group size must be >= 1, got {}", group_size));
  KindCounters p;
  p.calls = 1;
  if (group_size == 1) return p;
  const std::uint64_t n = static_cast<std::uint64_t>(group_size);
  const std::uint64_t e = elem_bytes;
  const std::uint64_t s = static_cast<std::uint64_t>(count) * e;
  switch (kind) {
    case CollectiveKind::broadcast: (is_root ? p.bytes_sent : p.bytes_received) = s; break;
    case CollectiveKind::reduce: (is_root ? p.bytes_received : p.bytes_sent) = s; break;
    case CollectiveKind::all_gather:
      p.bytes_sent = s;
      p.bytes_received = (n - 1) * s;
      break;
    case CollectiveKind::reduce_scatter:
      p.bytes_sent = (n - 1) * s;
      p.bytes_received = s;
      break;
    case CollectiveKind::send_recv: (is_root ? p.bytes_sent : p.bytes_received) = s; break;
    case CollectiveKind::gather:
      (is_root ? p.bytes_received : p.bytes_sent) = is_root ? (n - 1) * s : s;
      break;
    case CollectiveKind::scatter:
      (is_root ? p.bytes_sent : p.bytes_received) = is_root ? (n - 1) * s : s;
      break;
    case CollectiveKind::all_to_all:
      p.bytes_sent = (n - 1) * s;
      p.bytes_received = (n - 1) * s;
      break;
    case CollectiveKind::all_reduce: {
      const std::uint64_t moved = static_cast<std::uint64_t>(count) * (n - 1) / n * e;
      p.bytes_sent = moved;
      p.bytes_received = moved;
      break;
    }
  }
  return p;
}

std::uint64_t collective_volume(CollectiveKind kind, const KindCounters& c) {
  switch (kind) {
    case CollectiveKind::broadcast:
    case CollectiveKind::all_gather:
    case CollectiveKind::scatter: return c.bytes_received;
    case CollectiveKind::reduce:
    case CollectiveKind::reduce_scatter:
    case CollectiveKind::all_reduce:
    case CollectiveKind::gather:
    case CollectiveKind::all_to_all:
    case CollectiveKind::send_recv: return c.bytes_sent;
  }
  return 0;
}

void CollectiveCounters::record(CollectiveKind kind, const KindCounters& payload) {
  KindCounters& k = (*this)[kind];
  k.calls += payload.calls;
  k.bytes_sent += payload.bytes_sent;
  k.bytes_received += payload.bytes_received;
}

std::uint64_t CollectiveCounters::total_volume() const {
  std::uint64_t v = 0;
  for (CollectiveKind k : kAllCollectiveKinds) v += volume(k);
  return v;
}

KindCounters CollectiveCounters::total() const {
  KindCounters t;
  for (const KindCounters& k : by_kind_) {
    t.calls += k.calls;
    t.bytes_sent += k.bytes_sent;
    t.bytes_received += k.bytes_received;
  }
  return t;
}

CollectiveCounters& CollectiveCounters::operator+=(const CollectiveCounters& o) {
  for (CollectiveKind k : kAllCollectiveKinds) record(k, o[k]);
  return *this;
}

CollectiveCounters CollectiveCounters::operator-(const CollectiveCounters& earlier) const {
  CollectiveCounters d;
  for (CollectiveKind k : kAllCollectiveKinds) {
    const KindCounters& a = (*this)[k];
    const KindCounters& b = earlier[k];
    if (a.calls < b.calls || a.bytes_sent < b.bytes_sent || a.bytes_received < b.bytes_received)
      throw CheckFailure(fmt::format(
          "collective counters went backwards for {} (calls {} -> {}, sent {} -> {}, received "
          "{} -> {}): snapshots subtracted in the wrong order or across a reset",
          collective_kind_name(k), b.calls, a.calls, b.bytes_sent, a.bytes_sent, b.bytes_received,
          a.bytes_received));
    d[k] = KindCounters{a.calls - b.calls, a.bytes_sent - b.bytes_sent,
                        a.bytes_received - b.bytes_received};
  }
  return d;
}

namespace {

constexpr int kFieldsPerKind = 3;
constexpr int kFields = static_cast<int>(kCollectiveKindCount) * kFieldsPerKind;

std::vector<std::uint64_t> flatten(const CollectiveCounters& c) {
  std::vector<std::uint64_t> v;
  v.reserve(kFields);
  for (CollectiveKind k : kAllCollectiveKinds) {
    v.push_back(c[k].calls);
    v.push_back(c[k].bytes_sent);
    v.push_back(c[k].bytes_received);
  }
  return v;
}

CollectiveCounters unflatten(const std::vector<std::uint64_t>& v) {
  CollectiveCounters c;
  std::size_t i = 0;
  for (CollectiveKind k : kAllCollectiveKinds) {
    c[k] = KindCounters{v[i], v[i + 1], v[i + 2]};
    i += kFieldsPerKind;
  }
  return c;
}

CollectiveCounters allreduce(const std::vector<std::uint64_t>& local, MPI_Op op, MPI_Comm comm) {
  std::vector<std::uint64_t> out(local.size());
  DMUON_CHECK_MPI(MPI_Allreduce(local.data(), out.data(), kFields, MPI_UINT64_T, op, comm));
  return unflatten(out);
}

}  // namespace

CounterStats reduce_counters(const CollectiveCounters& local, MPI_Comm comm) {
  const std::vector<std::uint64_t> v = flatten(local);
  CounterStats s;
  s.sum = allreduce(v, MPI_SUM, comm);
  s.min = allreduce(v, MPI_MIN, comm);
  s.max = allreduce(v, MPI_MAX, comm);
  return s;
}

}  // namespace dmuon::comm
