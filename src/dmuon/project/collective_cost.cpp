#include "dmuon/project/collective_cost.hpp"

#include <algorithm>
#include <cmath>

namespace dmuon::project {
namespace {

using comm::CollectiveKind;

// NCCL's published tuning constants (src/graph/tuning.cc of NCCL 2.12–2.18, the model this
// file follows): latencies in µs, indexed [algorithm][protocol] with algorithm 0 = tree,
// 1 = ring and protocol 0 = LL, 1 = Simple (LL128 is left out: NCCL enables it only on
// Volta/Ampere NVLink systems in that model).
enum Algorithm { kTree = 0, kRing = 1 };
enum Proto { kLL = 0, kSimple = 1 };
constexpr double kBaseLatencyUs[2][2] = {{6.8, 0.0}, {6.6, 8.4}};
constexpr double kNvlinkStepUs[2][2] = {{0.52, 28.0}, {0.47, 3.4}};
constexpr double kNetStepUs[2][2] = {{5.0, 50.0}, {2.7, 9.6}};
// Trees "are not perfectly sticking to the model for medium sizes": NCCL's correction of the
// tree bandwidth by log2(bytes / 64), 64 B to 128 MB (LL and Simple rows).
constexpr double kTreeCorrection[2][22] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .5, .5, .6, .6, .7, .8, .9}};

int log2i(double x) {
  int l = 0;
  while (x >= 2) {
    x /= 2;
    ++l;
  }
  return l;
}

// Ring hops a collective's data crosses over n ranks on `nodes` domains, and how many of them
// leave a domain (ncclTopoTuneModel's nsteps / nInterSteps): all-reduce 2(n−1) hops, of which
// 2(nodes−1) between domains; all-gather and reduce-scatter n−1 and nodes−1; broadcast and
// reduce, a pipelined chain through the ring, n−1 and nodes−1 as well (NCCL counts n and nodes
// there, one hop too many on a single node).
void ring_steps(CollectiveKind kind, int n, int nodes, int& steps, int& inter_steps) {
  const int twice = kind == CollectiveKind::all_reduce ? 2 : 1;
  steps = twice * (n - 1);
  inter_steps = twice * (nodes - 1);
}

CollectiveTime nccl_time(const Machine& m, CollectiveKind kind, double bytes, const CommSpan& span,
                         int protocol) {
  const int n = span.ranks, nodes = std::max(1, span.domains);
  // The bus bandwidth: the NVLink fabric inside one domain; across domains each channel's
  // ring leaves a domain once, through the NIC of the rank there, and NCCL runs one channel
  // per local rank over its own NIC (rail-optimized), so k ranks per domain drive k NICs:
  // min(NVLink, k · NIC) (NVIDIA/nccl issue #1221: 8 × 40 GB/s = 320 GB/s busbw on 8×H100
  // nodes with 8×400G).
  const int per_domain = std::max(1, n / nodes);
  const double link = nodes == 1 ? m.intra.busbw_gbps
                                 : std::min(m.intra.busbw_gbps, m.inter.busbw_gbps * per_domain);
  const double factor = busbw_factor(kind, n);
  int steps = 0, inter_steps = 0;
  ring_steps(kind, n, nodes, steps, inter_steps);
  CollectiveTime best;
  double best_total = -1;
  for (int a : {kRing, kTree}) {
    if (a == kTree && kind != CollectiveKind::all_reduce) continue;  // NCCL: trees only there
    for (int p : {protocol}) {
      double busbw = link;
      if (a == kRing && p == kLL)
        busbw *= (nodes > 1 || kind == CollectiveKind::all_reduce || kind == CollectiveKind::reduce)
                     ? 1.0 / 4.0
                     : 1.0 / 3.0;
      if (a == kTree) {
        const double max_tree = nodes > 2 ? 80.0 : 110.0;
        busbw = std::min(busbw * 0.9, max_tree);
        if (p == kLL) busbw /= 3.8;
        const int log_size = log2i(bytes / 64.0);
        if (log_size < 22) busbw *= kTreeCorrection[p][log_size];
      }
      double intra_us = kNvlinkStepUs[a][p];
      const double net_us = kNetStepUs[a][p];
      if (nodes > 1 && p == kLL) intra_us *= 1.8;
      double lat_us = kBaseLatencyUs[a][p];
      if (a == kRing) {
        lat_us += (steps - inter_steps) * intra_us + inter_steps * net_us;
        // "Plateau effect of ring" for large cross-node all-reduces.
        if (p == kSimple && nodes > 1 && kind == CollectiveKind::all_reduce &&
            bytes >= n / 16.0 * 65536)
          lat_us *= 1.9;
      } else {
        lat_us += 2.0 * ((n / nodes - 1) * intra_us + log2i(nodes) * net_us);
      }
      CollectiveTime t;
      t.latency_s = lat_us * 1e-6;
      t.base_s = kBaseLatencyUs[a][p] * 1e-6;
      t.transfer_s = bytes * factor / (busbw * 1e9);
      t.algorithm = a == kRing ? "ring" : "tree";
      t.protocol = p == kSimple ? "simple" : "ll";
      if (best_total < 0 || t.total_s() < best_total) {
        best = t;
        best_total = t.total_s();
      }
    }
  }
  return best;
}

// A rooted gather or scatter (NCCL has neither: point-to-point sends inside one group): the
// root's link carries the other n − 1 chunks, one hop of latency (the TP exchange).
CollectiveTime rooted_p2p_time(const Machine& m, double total_bytes, const CommSpan& span,
                               int protocol) {
  const int n = span.ranks;
  const bool one_domain = span.domains <= 1;
  const double link =
      one_domain ? m.intra.busbw_gbps : std::min(m.intra.busbw_gbps, m.inter.busbw_gbps);
  const double hop_us = one_domain ? kNvlinkStepUs[kRing][protocol] : kNetStepUs[kRing][protocol];
  const double busbw = protocol == kSimple ? link : link * (one_domain ? 1.0 / 3.0 : 1.0 / 4.0);
  CollectiveTime t;
  t.latency_s = (kBaseLatencyUs[kRing][protocol] + hop_us) * 1e-6;
  t.base_s = kBaseLatencyUs[kRing][protocol] * 1e-6;
  t.transfer_s = total_bytes * (n - 1) / n / (busbw * 1e9);
  t.algorithm = "p2p";
  t.protocol = protocol == kSimple ? "simple" : "ll";
  return t;
}

// An all-to-all (NCCL has none: a send to and a receive from every peer inside one group,
// as nccl-tests' alltoall_perf): each rank's chunks to the peers of its own domain cross the
// NVLink fabric, those to other domains its own NIC (one per GPU, rail-optimized), both at
// once; the slower of the two is the transfer, one hop of latency.
CollectiveTime all_to_all_time(const Machine& m, double total_bytes, const CommSpan& span,
                               int protocol) {
  const int n = span.ranks, nodes = std::max(1, span.domains);
  const double chunk = total_bytes / n;
  const int local = std::max(1, n / nodes);  // ranks of one domain
  const double intra_bytes = (local - 1) * chunk, inter_bytes = (n - local) * chunk;
  const double ll = protocol == kSimple ? 1.0 : (nodes > 1 ? 1.0 / 4.0 : 1.0 / 3.0);
  double transfer = intra_bytes / (m.intra.busbw_gbps * ll * 1e9);
  if (inter_bytes > 0) {
    const double nic = m.inter.busbw_gbps > 0 ? m.inter.busbw_gbps : m.intra.busbw_gbps;
    transfer = std::max(transfer, inter_bytes / (nic * ll * 1e9));
  }
  const double hop_us = nodes > 1 ? kNetStepUs[kRing][protocol] : kNvlinkStepUs[kRing][protocol];
  CollectiveTime t;
  t.latency_s = (kBaseLatencyUs[kRing][protocol] + hop_us) * 1e-6;
  t.base_s = kBaseLatencyUs[kRing][protocol] * 1e-6;
  t.transfer_s = transfer;
  t.algorithm = "p2p";
  t.protocol = protocol == kSimple ? "simple" : "ll";
  return t;
}

}  // namespace

CollectiveTime collective_time(const Machine& m, CollectiveKind kind, std::int64_t count,
                               std::size_t elem_bytes, const CommSpan& span, Protocol protocol) {
  const int n = span.ranks;
  const double bytes = message_bytes(kind, count, elem_bytes, n);
  if (n <= 1 || bytes <= 0) return {};
  const auto& measured = m.measured.kinds[static_cast<std::size_t>(kind)];
  if (measured && span.domains <= 1) {
    // Measured at m.measured.ranks ranks; the latency scales with the ring steps.
    int steps = 0, inter = 0, steps_at = 0;
    ring_steps(kind, n, 1, steps, inter);
    ring_steps(kind, m.measured.ranks, 1, steps_at, inter);
    CollectiveTime t;
    t.latency_s = measured->latency_us * 1e-6 * steps / std::max(1, steps_at);
    t.transfer_s = bytes * busbw_factor(kind, n) / (measured->busbw_gbps * 1e9);
    t.algorithm = "measured";
    t.protocol = "measured";
    return t;
  }
  const int p = protocol == Protocol::simple ? kSimple : kLL;
  if (kind == CollectiveKind::gather || kind == CollectiveKind::scatter)
    return rooted_p2p_time(m, bytes, span, p);
  // One message to one peer: a 2-rank gather's one chunk on the same links.
  if (kind == CollectiveKind::send_recv)
    return rooted_p2p_time(m, 2 * bytes, CommSpan{2, std::min(span.domains, 2)}, p);
  if (kind == CollectiveKind::all_to_all) return all_to_all_time(m, bytes, span, p);
  return nccl_time(m, kind, bytes, span, p);
}

CollectiveTime collective_time(const Machine& m, CollectiveKind kind, std::int64_t count,
                               std::size_t elem_bytes, const CommSpan& span) {
  const CollectiveTime a = collective_time(m, kind, count, elem_bytes, span, Protocol::simple);
  const CollectiveTime b = collective_time(m, kind, count, elem_bytes, span, Protocol::ll);
  return b.total_s() < a.total_s() ? b : a;
}

namespace {

bool rooted(CollectiveKind kind) {
  return kind == CollectiveKind::broadcast || kind == CollectiveKind::reduce;
}

}  // namespace

CollectiveTime batch_time(const Machine& m, const std::vector<CallSize>& calls,
                          const CommSpan& span, bool serial_rooted) {
  CollectiveTime best;
  double best_total = -1;
  for (Protocol p : {Protocol::simple, Protocol::ll}) {
    CollectiveTime t;
    double launch = 0, hops = 0;  // serial rooted calls: one launch, every call's hops
    for (const auto& c : calls) {
      const CollectiveTime one = collective_time(m, c.kind, c.count, c.elem_bytes, span, p);
      if (m.device == DeviceKind::cpu) {
        t.latency_s += one.latency_s;
      } else if (serial_rooted && rooted(c.kind) && one.total_s() > 0) {
        launch = std::max(launch, one.base_s);
        hops += one.latency_s - one.base_s;
      } else {
        t.latency_s = std::max(t.latency_s, one.latency_s);
      }
      t.transfer_s += one.transfer_s;
      if (one.total_s() > 0) {
        t.algorithm = one.algorithm;
        t.protocol = one.protocol;
      }
    }
    t.latency_s = std::max(t.latency_s, launch + hops);
    if (best_total < 0 || t.total_s() < best_total) {
      best = t;
      best_total = t.total_s();
    }
  }
  return best;
}

}  // namespace dmuon::project
