#pragma once
// Per-rank counters of every collective a Communicator issues: calls and bytes per operation
// kind, under one LOGICAL PAYLOAD convention that does not depend on the algorithm the library
// uses underneath (ring, tree, ...). These are the numbers SPEC §6 audits.
//
// Convention (per rank; n = group size; e = element bytes; counts are in elements):
//   broadcast(count)           S = count·e. Root: sent S, received 0.
//                              Non-root: sent 0, received S.
//   reduce(count) to root      S = count·e. Non-root: sent S, received 0.
//                              Root: sent 0, received S.
//   all_gather(chunk)          c = chunk·e (this rank's contribution; output n·c).
//                              sent c, received (n−1)·c.
//   reduce_scatter(chunk)      c = chunk·e (this rank's output chunk; input n·c).
//                              sent (n−1)·c, received c.
//   gather(chunk) to root      c = chunk·e (each rank's part; the root's output n·c).
//                              Non-root: sent c. Root: received (n−1)·c.
//   scatter(chunk) from root   c = chunk·e (each rank's part; the root's input n·c).
//                              Root: sent (n−1)·c. Non-root: received c.
//   all_to_all(chunk)          c = chunk·e (what this rank sends each rank; input and
//                              output n·c). sent (n−1)·c, received (n−1)·c.
//   send_recv(count)           S = count·e, one call on each side (Communicator::send on the
//                              sender, ::recv on the receiver; the sender is the "root").
//                              Sender: sent S. Receiver: received S.
//   all_reduce(count)          as reduce-scatter + all-gather on a chunked payload:
//                              sent = received = floor(count·(n−1)/n)·e.
//                              Rounding: the element count is floored, so bytes stay a multiple
//                              of e; exact whenever n divides count.
//   n == 1                     nothing moves: bytes 0, but the call is counted.
//
// volume(kind) is the one-directional quantity SPEC §6's per-rank formulas count:
//   broadcast, all_gather, scatter -> received;  reduce, reduce_scatter, all_reduce,
//   gather, all_to_all, send_recv -> sent.
// E.g. DMuon Z3 per rank per step = 3·(P_M − elements owned by this rank) elements:
//   2 broadcasts received + 1 reduce sent per non-owned parameter.

#include <mpi.h>

#include <array>
#include <cstddef>
#include <cstdint>

namespace dmuon::comm {

enum class CollectiveKind {
  broadcast = 0,
  reduce,
  reduce_scatter,
  all_gather,
  all_reduce,
  gather,      ///< rooted: every rank's chunk to the root (the TP exchange's gather)
  scatter,     ///< rooted: the root's chunks to every rank (the TP exchange's scatter)
  all_to_all,  ///< every rank's chunk i to rank i (expert parallelism's token dispatch)
  send_recv,   ///< point to point: one message from a sender to one receiver (pipeline stages)
};
inline constexpr std::size_t kCollectiveKindCount = 9;
inline constexpr std::array<CollectiveKind, kCollectiveKindCount> kAllCollectiveKinds = {
    CollectiveKind::broadcast,  CollectiveKind::reduce,     CollectiveKind::reduce_scatter,
    CollectiveKind::all_gather, CollectiveKind::all_reduce, CollectiveKind::gather,
    CollectiveKind::scatter,    CollectiveKind::all_to_all, CollectiveKind::send_recv};
/// A collective with a root (broadcast, reduce, gather, scatter).
inline constexpr bool is_rooted(CollectiveKind k) {
  return k == CollectiveKind::broadcast || k == CollectiveKind::reduce ||
         k == CollectiveKind::gather || k == CollectiveKind::scatter;
}

/// "broadcast", "reduce", "reduce_scatter", "all_gather", "all_reduce", "gather", "scatter",
/// "all_to_all", "send_recv".
const char* collective_kind_name(CollectiveKind kind);

/// One kind's tally on one rank.
struct KindCounters {
  std::uint64_t calls = 0;
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;

  bool operator==(const KindCounters& o) const {
    return calls == o.calls && bytes_sent == o.bytes_sent && bytes_received == o.bytes_received;
  }
  bool operator!=(const KindCounters& o) const { return !(*this == o); }
};

/// The payload of ONE call under the convention above (calls = 1). `count` is the element
/// count as passed to the Communicator: the message for broadcast/reduce/all_reduce, the
/// per-rank chunk for all_gather (send), reduce_scatter (receive), gather and scatter, the
/// per-peer chunk for all_to_all.
/// `is_root` matters only for the rooted kinds. Throws InputError for group_size < 1.
KindCounters collective_payload(CollectiveKind kind, int group_size, bool is_root,
                                std::size_t count, std::size_t elem_bytes);

/// The convention's volume of a tally: received for broadcast/all_gather/scatter, sent
/// otherwise.
std::uint64_t collective_volume(CollectiveKind kind, const KindCounters& c);

/// The bytes one call counts on a rank (its collective_payload's collective_volume).
inline std::int64_t counted_bytes(CollectiveKind kind, int group_size, bool is_root,
                                  std::size_t count, std::size_t elem_bytes) {
  return static_cast<std::int64_t>(
      collective_volume(kind, collective_payload(kind, group_size, is_root, count, elem_bytes)));
}

/// Counters of all kinds on one rank. Plain value type: copy it to snapshot, subtract two
/// snapshots to get one step's traffic, reset() at the start of a step.
class CollectiveCounters {
 public:
  /// Adds one call's payload (normally collective_payload(...)) to `kind`.
  void record(CollectiveKind kind, const KindCounters& payload);
  const KindCounters& operator[](CollectiveKind kind) const {
    return by_kind_[static_cast<std::size_t>(kind)];
  }
  KindCounters& operator[](CollectiveKind kind) { return by_kind_[static_cast<std::size_t>(kind)]; }

  std::uint64_t volume(CollectiveKind kind) const { return collective_volume(kind, (*this)[kind]); }
  /// Sum of volume() over all kinds.
  std::uint64_t total_volume() const;
  /// Sum of calls/bytes over all kinds.
  KindCounters total() const;

  void reset() { by_kind_ = {}; }
  CollectiveCounters snapshot() const { return *this; }

  CollectiveCounters& operator+=(const CollectiveCounters& o);
  /// Element-wise difference (later snapshot minus earlier one); throws CheckFailure if any
  /// field would go negative (the snapshots were taken in the wrong order or after a reset).
  CollectiveCounters operator-(const CollectiveCounters& earlier) const;
  bool operator==(const CollectiveCounters& o) const { return by_kind_ == o.by_kind_; }
  bool operator!=(const CollectiveCounters& o) const { return !(*this == o); }

 private:
  std::array<KindCounters, kCollectiveKindCount> by_kind_{};
};

/// Field-wise sum / min / max of every rank's counters over `comm` (collective: one
/// MPI_Allreduce per statistic; every rank gets the result).
struct CounterStats {
  CollectiveCounters sum;
  CollectiveCounters min;
  CollectiveCounters max;
};
CounterStats reduce_counters(const CollectiveCounters& local, MPI_Comm comm);

}  // namespace dmuon::comm
