#pragma once
// How long one collective takes on an idle machine: NCCL's own cost model (NCCL
// src/graph/tuning.cc, ncclTopoTuneModel + ncclTopoGetAlgoTime): per algorithm (ring; tree
// for all-reduce) and protocol (Simple, LL), time = latency + bytes / algorithm bandwidth,
// and the fastest pair is what NCCL would pick. Latency = a base per (algorithm, protocol)
// plus a per-step hardware latency, NVLink for steps inside an NVLink domain and the NIC for
// steps between domains; bandwidth = the link's bus bandwidth (machine file) scaled by the
// protocol and algorithm factors of the same file. A machine calibrated with --calibrate
// replaces the model per kind by what was measured.
//
// The time is returned in two parts because they behave differently when collectives run
// concurrently: the latency is not shared, the transfer is (link_network.hpp).
//
// Message sizes follow nccl-tests: S = count·e for broadcast, reduce, all_reduce; S = n·count·e
// (the full buffer) for all_gather and reduce_scatter, whose `count` is the per-rank chunk as
// the Communicator takes it. Bus-bandwidth factors: all_reduce 2(n−1)/n, all_gather and
// reduce_scatter (n−1)/n, broadcast and reduce 1.

#include <cstdint>
#include <vector>

#include "dmuon/comm/bus_bandwidth.hpp"
#include "dmuon/comm/collective_counters.hpp"
#include "dmuon/project/machine_model.hpp"

namespace dmuon::project {

/// The ranks of a communicator as the cost model needs them.
struct CommSpan {
  int ranks = 1;    ///< participants n
  int domains = 1;  ///< NVLink domains they occupy (NCCL's nNodes)
};

struct CollectiveTime {
  double latency_s = 0;  ///< not shared between concurrent collectives
  /// Of latency_s, the launch's share (NCCL's base latency of its algorithm and protocol),
  /// paid once by a group of collectives in one launch; a measured latency is all per call.
  double base_s = 0;
  double transfer_s = 0;  ///< bytes / bandwidth at the full link rate
  const char* algorithm = "none";
  const char* protocol = "none";
  double total_s() const { return latency_s + transfer_s; }
};

// Message sizes and bus-bandwidth factors: dmuon/comm/bus_bandwidth.hpp (shared with the
// engine's measured bandwidths).
using comm::busbw_factor;
using comm::message_bytes;

/// NCCL's protocols in the model: Simple (bandwidth) and LL (low latency, a quarter of the
/// bandwidth).
enum class Protocol { simple, ll };

/// Time of one collective alone on the machine with `protocol` (the faster algorithm for it).
/// n == 1 or S == 0: zero (NCCL returns at once).
/// A gather or scatter (the TP exchange) of `count` elements per rank: NCCL runs it as grouped
/// point-to-point sends to (from) the root, so the root's link carries the other ranks' chunks,
/// (n − 1)/n of S = n · count · e:
///   time = base latency + one hop (NVLink inside one domain, the NIC across domains)
///        + (n − 1)/n · S / bandwidth
/// where the bandwidth is the intra link's bus bandwidth inside one domain, else
/// min(intra, inter) (one NIC at the root), a quarter of it with LL (the ring's LL factor
/// across domains, 1/3 inside one), with NCCL's ring constants.
/// An all-to-all of `count` elements to each peer: each rank's (local − 1) chunks to the ranks
/// of its domain (local = n / domains) on the intra link and its (n − local) chunks to other
/// domains on its own NIC, concurrently:
///   time = base latency + one hop + max(intra bytes / intra busbw, inter bytes / inter busbw)
/// (a third of the bandwidth with LL inside one domain, a quarter across, as above).
CollectiveTime collective_time(const Machine& m, comm::CollectiveKind kind, std::int64_t count,
                               std::size_t elem_bytes, const CommSpan& span, Protocol protocol);
/// The same with the faster protocol, as NCCL picks for a collective on its own.
CollectiveTime collective_time(const Machine& m, comm::CollectiveKind kind, std::int64_t count,
                               std::size_t elem_bytes, const CommSpan& span);

/// One call of a batch.
struct CallSize {
  comm::CollectiveKind kind;
  std::int64_t count;
  std::size_t elem_bytes;
};

/// A batch of collectives launched together. On a GPU (one NCCL group) they run concurrently:
/// the batch pays the longest latency once and the sum of the transfers, and NCCL picks one
/// protocol for the aggregated group, the one that makes the batch fastest. With
/// `serial_rooted` (engine::StepRunModel::serial_rooted_calls) the rooted calls (broadcasts,
/// reduces: each pipelined along the ring from or to its own root) run one after another on
/// the channels of the one launch, each filling its pipeline anew: the batch pays the largest
/// launch latency (base_s) once plus every rooted call's hop latency (latency_s − base_s).
/// On a CPU (a batch of nonblocking MPI collectives) the core progresses them one after
/// another: the latencies add up as well.
CollectiveTime batch_time(const Machine& m, const std::vector<CallSize>& calls,
                          const CommSpan& span, bool serial_rooted = false);

}  // namespace dmuon::project
