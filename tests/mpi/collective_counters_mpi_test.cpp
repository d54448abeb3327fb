// Counters follow the logical payload convention of collective_counters.hpp exactly: bytes
// are hand-computed here, never derived from the function under test.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <vector>

#include "dmuon/base/error.hpp"
#include "dmuon/comm/collective_counters.hpp"
#include "dmuon/comm/communicator.hpp"
#include "mpi_test_util.hpp"

namespace dmuon::comm {
namespace {

using ::dmuon::test::world_rank;
using ::dmuon::test::world_size;

KindCounters kc(std::uint64_t calls, std::uint64_t sent, std::uint64_t received) {
  return KindCounters{calls, sent, received};
}

// Pure convention table (no communication): 10 f32 elements = 40 bytes.
TEST(CollectiveCounters, ConventionTable) {
  using K = CollectiveKind;
  // n == 1: nothing moves, the call counts.
  for (K k : kAllCollectiveKinds) EXPECT_EQ(collective_payload(k, 1, true, 10, 4), kc(1, 0, 0));
  EXPECT_EQ(collective_payload(K::broadcast, 4, true, 10, 4), kc(1, 40, 0));
  EXPECT_EQ(collective_payload(K::broadcast, 4, false, 10, 4), kc(1, 0, 40));
  EXPECT_EQ(collective_payload(K::reduce, 4, true, 10, 4), kc(1, 0, 40));
  EXPECT_EQ(collective_payload(K::reduce, 4, false, 10, 4), kc(1, 40, 0));
  EXPECT_EQ(collective_payload(K::all_gather, 4, false, 10, 4), kc(1, 40, 120));
  EXPECT_EQ(collective_payload(K::reduce_scatter, 4, false, 10, 4), kc(1, 120, 40));
  // all_reduce: floor(count·(n−1)/n) elements each way.
  EXPECT_EQ(collective_payload(K::all_reduce, 2, false, 10, 4), kc(1, 20, 20));  // 5 el
  EXPECT_EQ(collective_payload(K::all_reduce, 3, false, 9, 4), kc(1, 24, 24));   // 6 el
  EXPECT_EQ(collective_payload(K::all_reduce, 4, false, 10, 4), kc(1, 28, 28));  // 7.5 -> 7
  EXPECT_EQ(collective_payload(K::all_reduce, 8, false, 10, 4), kc(1, 32, 32));  // 8.75 -> 8
  EXPECT_EQ(collective_payload(K::all_reduce, 8, false, 10, 2), kc(1, 16, 16));  // bf16
  EXPECT_EQ(collective_payload(K::all_gather, 8, false, 3, 2), kc(1, 6, 42));    // bf16
  // gather / scatter of 10-element chunks over 4 ranks: the root takes (gives) the other 3.
  EXPECT_EQ(collective_payload(K::gather, 4, false, 10, 4), kc(1, 40, 0));
  EXPECT_EQ(collective_payload(K::gather, 4, true, 10, 4), kc(1, 0, 120));
  EXPECT_EQ(collective_payload(K::scatter, 4, false, 10, 4), kc(1, 0, 40));
  EXPECT_EQ(collective_payload(K::scatter, 4, true, 10, 4), kc(1, 120, 0));
  EXPECT_EQ(collective_payload(K::gather, 2, false, 10, 2), kc(1, 20, 0));  // bf16
  // all_to_all of 10 elements to each of 4 ranks: 3 chunks leave, 3 arrive.
  EXPECT_EQ(collective_payload(K::all_to_all, 4, false, 10, 4), kc(1, 120, 120));
  EXPECT_EQ(collective_payload(K::all_to_all, 1, false, 10, 4), kc(1, 0, 0));
  EXPECT_THROW(collective_payload(K::broadcast, 0, true, 1, 4), InputError);
  // volume: received for broadcast/all_gather, sent for the rest.
  EXPECT_EQ(collective_volume(K::broadcast, kc(1, 40, 0)), 0u);
  EXPECT_EQ(collective_volume(K::broadcast, kc(1, 0, 40)), 40u);
  EXPECT_EQ(collective_volume(K::all_gather, kc(1, 40, 120)), 120u);
  EXPECT_EQ(collective_volume(K::reduce, kc(1, 40, 0)), 40u);
  EXPECT_EQ(collective_volume(K::reduce_scatter, kc(1, 120, 40)), 120u);
  EXPECT_EQ(collective_volume(K::all_reduce, kc(1, 28, 28)), 28u);
  // gather: sent (the non-roots' chunks); scatter: received.
  EXPECT_EQ(collective_volume(K::gather, kc(1, 40, 0)), 40u);
  EXPECT_EQ(collective_volume(K::gather, kc(1, 0, 120)), 0u);
  EXPECT_EQ(collective_volume(K::scatter, kc(1, 0, 40)), 40u);
  EXPECT_EQ(collective_volume(K::scatter, kc(1, 120, 0)), 0u);
  EXPECT_EQ(collective_volume(K::all_to_all, kc(1, 120, 90)), 120u);  // sent
  EXPECT_STREQ(collective_kind_name(K::all_to_all), "all_to_all");
  EXPECT_STREQ(collective_kind_name(K::gather), "gather");
  EXPECT_STREQ(collective_kind_name(K::scatter), "scatter");
  EXPECT_STREQ(collective_kind_name(K::reduce_scatter), "reduce_scatter");
}

// One call of each kind through the MPI communicator at the actual rank count.
TEST(CollectiveCounters, MatchConventionThroughCommunicator) {
  auto comm = make_communicator(Backend::mpi, MPI_COMM_WORLD);
  const std::uint64_t n = static_cast<std::uint64_t>(comm->size());
  const int me = comm->rank();
  const int last = comm->size() - 1;
  std::vector<float> a(12 * n, 1.0f), b(12 * n, 0.0f);
  comm->broadcast(a.data(), 6, DType::f32, 0);                                   // 24 bytes
  comm->reduce_avg(a.data(), b.data(), 6, DType::f32, last);                     // 24 bytes
  comm->all_gather(a.data(), b.data(), 5, DType::f32);                           // chunk 20 bytes
  comm->reduce_scatter_sum(a.data(), b.data(), 5, DType::f32);                   // chunk 20 bytes
  comm->all_reduce_sum(a.data(), b.data(), 12, DType::f32);                      // 48 bytes
  comm->gather(a.data(), me == last ? b.data() : nullptr, 3, DType::f32, last);  // 12 bytes
  comm->scatter(me == 0 ? a.data() : nullptr, b.data(), 2, DType::f32, 0);       // 8 bytes
  std::vector<float> to_all(2 * n, 1.0f), from_all(2 * n, 0.0f);
  comm->all_to_all(to_all.data(), from_all.data(), 2, DType::f32);  // 8 bytes to each rank
  const bool many = n > 1;
  const auto& c = comm->counters();
  using K = CollectiveKind;
  EXPECT_EQ(c[K::broadcast], kc(1, me == 0 && many ? 24 : 0, me != 0 ? 24 : 0));
  EXPECT_EQ(c[K::reduce], kc(1, me != last ? 24 : 0, me == last && many ? 24 : 0));
  EXPECT_EQ(c[K::all_gather], kc(1, many ? 20 : 0, 20 * (n - 1)));
  EXPECT_EQ(c[K::reduce_scatter], kc(1, 20 * (n - 1), many ? 20 : 0));
  // all_reduce of 12 elements: floor(12·(n−1)/n) elements.
  const std::map<std::uint64_t, std::uint64_t> ar_bytes = {{1, 0}, {2, 24}, {4, 36}, {8, 40}};
  ASSERT_TRUE(ar_bytes.count(n)) << "no hand value for n=" << n;
  EXPECT_EQ(c[K::all_reduce], kc(1, ar_bytes.at(n), ar_bytes.at(n)));
  // gather to the last rank: the others send 12 bytes, it receives 12·(n−1); scatter from 0.
  EXPECT_EQ(c[K::gather], kc(1, me != last ? 12 : 0, me == last ? 12 * (n - 1) : 0));
  EXPECT_EQ(c[K::scatter], kc(1, me == 0 ? 8 * (n - 1) : 0, me != 0 ? 8 : 0));
  EXPECT_EQ(c.volume(K::broadcast), me != 0 ? 24u : 0u);
  EXPECT_EQ(c.volume(K::all_reduce), ar_bytes.at(n));
  EXPECT_EQ(c[K::all_to_all], kc(1, 8 * (n - 1), 8 * (n - 1)));
  EXPECT_EQ(c.total().calls, 8u);
  EXPECT_EQ(c.total_volume(), c.volume(K::broadcast) + c.volume(K::reduce) +
                                  c.volume(K::all_gather) + c.volume(K::reduce_scatter) +
                                  c.volume(K::all_reduce) + c.volume(K::gather) +
                                  c.volume(K::scatter) + c.volume(K::all_to_all));
}

TEST(CollectiveCounters, SnapshotDifferenceAndReset) {
  auto comm = make_communicator(Backend::mpi, MPI_COMM_WORLD);
  std::vector<float> x(4, 1.0f);
  comm->broadcast(x.data(), 4, DType::f32, 0);
  const CollectiveCounters before = comm->counters().snapshot();
  comm->broadcast(x.data(), 4, DType::f32, 0);
  comm->all_reduce_sum(x.data(), x.data(), 4, DType::f32);
  const CollectiveCounters step = comm->counters() - before;
  EXPECT_EQ(step[CollectiveKind::broadcast].calls, 1u);
  EXPECT_EQ(step[CollectiveKind::all_reduce].calls, 1u);
  EXPECT_EQ(step.total().calls, 2u);
  EXPECT_THROW(before - comm->counters(), CheckFailure);
  CollectiveCounters doubled = step;
  doubled += step;
  EXPECT_EQ(doubled[CollectiveKind::broadcast].calls, 2u);
  comm->reset_counters();
  EXPECT_EQ(comm->counters(), CollectiveCounters{});
}

TEST(CollectiveCounters, SumMinMaxAcrossRanks) {
  const std::uint64_t n = static_cast<std::uint64_t>(world_size());
  const std::uint64_t r = static_cast<std::uint64_t>(world_rank());
  CollectiveCounters local;
  local.record(CollectiveKind::reduce, kc(r + 1, 10 * r, 7));
  const CounterStats s = reduce_counters(local, MPI_COMM_WORLD);
  EXPECT_EQ(s.sum[CollectiveKind::reduce], kc(n * (n + 1) / 2, 10 * n * (n - 1) / 2, 7 * n));
  EXPECT_EQ(s.min[CollectiveKind::reduce], kc(1, 0, 7));
  EXPECT_EQ(s.max[CollectiveKind::reduce], kc(n, 10 * (n - 1), 7));
  EXPECT_EQ(s.sum[CollectiveKind::broadcast], kc(0, 0, 0));
}

// SPEC §6, Z3, 1-D: per site two packed broadcasts per owner (forward, and again before
// backward) plus one AVG reduce per parameter: volume = 3·(P_M − owned by this rank).
TEST(CollectiveCounters, Z3StepVolumeMatchesSpec) {
  auto comm = make_communicator(Backend::mpi, MPI_COMM_WORLD);
  const int n = comm->size();
  const int me = comm->rank();
  constexpr int kParams = 11;
  constexpr int kSites = 3;
  auto numel = [](int p) { return static_cast<std::size_t>(10 + 3 * p); };
  auto owner = [n](int p) { return (p * 5 + 1) % n; };
  auto site = [](int p) { return p % kSites; };
  std::uint64_t p_m = 0, owned = 0;
  for (int p = 0; p < kParams; ++p) {
    p_m += numel(p);
    if (owner(p) == me) owned += numel(p);
  }
  auto packed_len = [&](int s, int o) {
    std::size_t len = 0;
    for (int p = 0; p < kParams; ++p)
      if (site(p) == s && owner(p) == o) len += numel(p);
    return len;
  };
  auto broadcast_site = [&](int s) {
    std::vector<std::vector<float>> bufs(static_cast<std::size_t>(n));
    comm->group_start();
    for (int o = 0; o < n; ++o) {
      bufs[o].assign(packed_len(s, o), 1.0f);
      if (!bufs[o].empty()) comm->broadcast(bufs[o].data(), bufs[o].size(), DType::f32, o);
    }
    comm->group_end().wait();
  };
  comm->reset_counters();
  for (int s = 0; s < kSites; ++s) broadcast_site(s);  // forward
  for (int s = kSites - 1; s >= 0; --s) {              // backward
    broadcast_site(s);                                 // Z3 re-gather
    std::vector<std::vector<float>> grads(kParams), outs(kParams);
    comm->group_start();
    for (int p = 0; p < kParams; ++p) {
      if (site(p) != s) continue;
      grads[p].assign(numel(p), 1.0f);
      outs[p].assign(numel(p), 0.0f);
      comm->reduce_avg(grads[p].data(), outs[p].data(), numel(p), DType::f32, owner(p));
    }
    comm->group_end().wait();
  }
  const CollectiveCounters& c = comm->counters();
  EXPECT_EQ(c.total_volume(), 4 * 3 * (p_m - owned)) << "P_M=" << p_m << " owned=" << owned;
  EXPECT_EQ(c[CollectiveKind::reduce].calls, static_cast<std::uint64_t>(kParams));
}

}  // namespace
}  // namespace dmuon::comm
