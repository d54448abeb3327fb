// The replay against timelines worked out by hand: programs built directly (what the compiler
// makes of a schedule: compute, phase switches, issues on streams, waits), on machines whose
// collectives cost α + S/β exactly (test_machines.hpp).

#include <gtest/gtest.h>

#include <array>
#include <string>
#include <utility>
#include <vector>

#include "dmuon/base/error.hpp"
#include "dmuon/project/program_store.hpp"
#include "dmuon/project/replay.hpp"
#include "test_machines.hpp"

namespace {

using namespace dmuon;
using comm::CollectiveKind;
using engine::CommGroup;
using engine::Phase;
using project::Instruction;
using project::Stream;

constexpr double kTol = 1e-9;  // ms

// A world of `rows` × `columns` ranks; programs are added per rank.
struct World {
  project::WorldPrograms w;
  World(int rows, int columns) {
    w.world = rows * columns;
    w.grid = RankGrid{rows, columns, 1};
    w.program_of_rank.assign(static_cast<std::size_t>(w.world), 0);
    w.check_batches = true;
  }
  const project::BatchSpec* spec(CommGroup c, engine::Op op, CollectiveKind k, std::int64_t count,
                                 int root = 0) {
    project::BatchSpec b;
    b.comm = c;
    b.op = op;
    b.group = 0;
    b.calls.push_back({k, count, 4, root});
    w.specs.push_back(b);
    return &w.specs.back();
  }
  // Every rank runs `p`.
  void all(const project::RankProgram& p) {
    w.programs = {p};
    std::fill(w.program_of_rank.begin(), w.program_of_rank.end(), 0);
  }
};

struct Builder {
  project::RankProgram p;
  std::vector<std::pair<std::uint8_t, int>> issued;  // (communicator, sequence number there)
  std::array<int, engine::kCommGroupCount> count{};
  Builder& phase(Phase ph, bool exposed) {
    Instruction i;
    i.kind = Instruction::switch_phase;
    i.phase = static_cast<std::uint8_t>(ph);
    i.exposed = exposed;
    p.code.push_back(i);
    return *this;
  }
  // `sm_seconds` of it scale with the SMs it gets (compute_contention.hpp).
  Builder& compute(double seconds, double sm_seconds = 0) {
    Instruction i;
    i.kind = Instruction::compute;
    i.seconds = seconds;
    i.sm_seconds = sm_seconds;
    p.code.push_back(i);
    return *this;
  }
  Builder& issue(const project::BatchSpec* spec, Stream s) {
    Instruction i;
    i.kind = Instruction::issue;
    i.stream = static_cast<std::uint8_t>(s);
    i.comm = static_cast<std::uint8_t>(spec->comm);
    i.spec = spec;
    issued.emplace_back(i.comm, count[i.comm]++);
    p.code.push_back(i);
    return *this;
  }
  // A stage-2 issue: its batch starts on its stream once the dep-th issue's batch has ended.
  Builder& issue_after(const project::BatchSpec* spec, Stream s, int dep) {
    const auto [dep_comm, dep_seq] = issued[static_cast<std::size_t>(dep)];
    issue(spec, s);
    Instruction& i = p.code.back();
    i.dep_comm = dep_comm;
    i.dep_back = count[dep_comm] - dep_seq - (dep_comm == i.comm ? 1 : 0);
    return *this;
  }
  // Waits for the issue-th issue of the program.
  Builder& wait(int issue) {
    Instruction i;
    i.kind = Instruction::wait;
    const auto [comm, seq] = issued[static_cast<std::size_t>(issue)];
    i.comm = comm;
    i.back = count[comm] - seq;
    p.code.push_back(i);
    return *this;
  }
};

double ms(const project::ReplayResult& r, int rank, Phase p, int step = 0) {
  return r.phase_ms(step, rank, p);
}

TEST(ReplayTimeline, SingleBroadcast) {
  // 4 ranks, α = 10 µs, β = 5 GB/s: a 4 MB broadcast ends at 10 µs + 0.8 ms = 0.81 ms; the
  // compute stream waits for it from 0: all of it is exposed forward communication.
  const auto m = project::testing::measured_machine(4, 10, 5);
  World w(1, 4);
  const auto* b =
      w.spec(CommGroup::shard, engine::Op::issue_weights, CollectiveKind::broadcast, 1'000'000);
  w.all(Builder().phase(Phase::forward_comm, true).issue(b, Stream::weights).wait(0).p);
  const auto r = project::replay(w.w, m, 1);
  for (int q = 0; q < 4; ++q) {
    EXPECT_NEAR(ms(r, q, Phase::step), 0.81, kTol);
    EXPECT_NEAR(ms(r, q, Phase::forward_comm), 0.81, kTol);
    EXPECT_NEAR(ms(r, q, Phase::exposed_comm), 0.81, kTol);
  }
  // Counted as the communicator counts: every receiver 4 MB, the root nothing.
  const auto ch = engine::channel_index(CommGroup::shard, CollectiveKind::broadcast);
  EXPECT_EQ(r.bytes[ch * 4 + 0], 0);
  EXPECT_EQ(r.bytes[ch * 4 + 1], 4'000'000);
  EXPECT_EQ(r.calls[ch * 4 + 3], 1);
}

TEST(ReplayTimeline, InFlightTimeIsTheUnionOfAChannelsSpans) {
  // No latency, 5 GB/s, 5 MB broadcasts (1 ms alone). Two at once on two streams share the
  // link: both run from 0 to 2 ms; 1 ms of compute; a third runs from 3 to 4 ms. The channel
  // had one in flight for 3 ms (not 2 + 2 + 1) with 15 MB of messages: algbw 5 GB/s, the
  // link's rate, as nccl-tests would read it (engine/exec/in_flight_clock.hpp).
  const auto m = project::testing::measured_machine(2, 0, 5);
  World w(1, 2);
  const auto* a =
      w.spec(CommGroup::shard, engine::Op::issue_weights, CollectiveKind::broadcast, 1'250'000);
  w.all(Builder()
            .phase(Phase::forward_comm, true)
            .issue(a, Stream::weights)
            .issue(a, Stream::reduce)
            .wait(0)
            .wait(1)
            .phase(Phase::forward_compute, false)
            .compute(1e-3)
            .phase(Phase::forward_comm, true)
            .issue(a, Stream::weights)
            .wait(2)
            .p);
  const auto r = project::replay(w.w, m, 1);
  EXPECT_NEAR(ms(r, 0, Phase::step), 4.0, kTol);
  const auto ch = engine::channel_index(CommGroup::shard, CollectiveKind::broadcast);
  EXPECT_NEAR(r.in_flight_ms[ch], 3.0, kTol);
  EXPECT_DOUBLE_EQ(r.message_bytes[ch], 15e6);
  for (std::size_t c = 0; c < engine::kChannelCount; ++c)
    if (c != ch) {
      EXPECT_EQ(r.in_flight_ms[c], 0.0) << engine::channel_name(c);
    }
}

TEST(ReplayTimeline, RingAllReduceAtKnownAlphaBeta) {
  // α = 20 µs at 4 ranks (two traversals), β = 5 GB/s, 4 MB: 20 µs + 4e6·(2·3/4)/5e9 s.
  const auto m = project::testing::measured_machine(4, 10, 5);
  World w(1, 4);
  const auto* b =
      w.spec(CommGroup::shard, engine::Op::issue_reduce, CollectiveKind::all_reduce, 1'000'000);
  w.all(Builder().phase(Phase::backward_comm, true).issue(b, Stream::reduce).wait(0).p);
  const auto r = project::replay(w.w, m, 1);
  EXPECT_NEAR(ms(r, 2, Phase::step), 0.02 + 1.2, kTol);
}

TEST(ReplayTimeline, ACollectiveStartsWhenItsLastParticipantIssues) {
  // Rank 1 computes 1 ms before issuing; rank 0 issues at once and waits: the broadcast runs
  // from 1 ms to 1.81 ms on both.
  const auto m = project::testing::measured_machine(2, 10, 5);
  World w(1, 2);
  const auto* b =
      w.spec(CommGroup::shard, engine::Op::issue_weights, CollectiveKind::broadcast, 1'000'000);
  w.w.programs = {Builder().phase(Phase::forward_comm, true).issue(b, Stream::weights).wait(0).p,
                  Builder()
                      .phase(Phase::forward_compute, false)
                      .compute(1e-3)
                      .phase(Phase::forward_comm, true)
                      .issue(b, Stream::weights)
                      .wait(0)
                      .p};
  w.w.program_of_rank = {0, 1};
  const auto r = project::replay(w.w, m, 1);
  EXPECT_NEAR(ms(r, 0, Phase::step), 1.81, kTol);
  EXPECT_NEAR(ms(r, 0, Phase::exposed_comm), 1.81, kTol);
  EXPECT_NEAR(ms(r, 1, Phase::step), 1.81, kTol);
  EXPECT_NEAR(ms(r, 1, Phase::forward_compute), 1.0, kTol);
  EXPECT_NEAR(ms(r, 1, Phase::exposed_comm), 0.81, kTol);
}

TEST(ReplayTimeline, TwoOverlappingCollectivesShareOneLink) {
  // No latency, 5 GB/s: alone, A (5 MB) takes 1 ms and B (15 MB) 3 ms. Both start at 0 on the
  // same ports (weights and reduce streams of the same ranks): each runs at half rate, so A
  // ends at 2 ms with B a third done; B's remaining 2 ms at full rate end at 4 ms (= A + B:
  // the link is never idle).
  const auto m = project::testing::measured_machine(2, 0, 5);
  World w(1, 2);
  const auto* a =
      w.spec(CommGroup::shard, engine::Op::issue_weights, CollectiveKind::broadcast, 1'250'000);
  const auto* b =
      w.spec(CommGroup::shard, engine::Op::issue_reduce, CollectiveKind::reduce, 3'750'000);
  w.all(Builder()
            .phase(Phase::forward_comm, true)
            .issue(a, Stream::weights)
            .issue(b, Stream::reduce)
            .wait(0)
            .phase(Phase::backward_comm, true)
            .wait(1)
            .p);
  const auto r = project::replay(w.w, m, 1);
  EXPECT_NEAR(ms(r, 0, Phase::forward_comm), 2.0, kTol);
  EXPECT_NEAR(ms(r, 0, Phase::backward_comm), 2.0, kTol);
  EXPECT_NEAR(ms(r, 1, Phase::step), 4.0, kTol);
}

TEST(ReplayTimeline, LatencyIsNotShared) {
  // The same with α = 0.5 ms each: both transfers start at 0.5 ms, A ends at 2.5, B at 4.5.
  const auto m = project::testing::measured_machine(2, 500, 5);
  World w(1, 2);
  const auto* a =
      w.spec(CommGroup::shard, engine::Op::issue_weights, CollectiveKind::broadcast, 1'250'000);
  const auto* b =
      w.spec(CommGroup::shard, engine::Op::issue_reduce, CollectiveKind::reduce, 3'750'000);
  w.all(Builder()
            .phase(Phase::forward_comm, true)
            .issue(a, Stream::weights)
            .issue(b, Stream::reduce)
            .wait(0)
            .phase(Phase::backward_comm, true)
            .wait(1)
            .p);
  const auto r = project::replay(w.w, m, 1);
  EXPECT_NEAR(ms(r, 0, Phase::forward_comm), 2.5, kTol);
  EXPECT_NEAR(ms(r, 0, Phase::step), 4.5, kTol);
}

TEST(ReplayTimeline, CollectivesOnOneStreamRunInOrder) {
  // Two 1 ms broadcasts on the weights stream: the second starts when the first ends.
  const auto m = project::testing::measured_machine(2, 0, 5);
  World w(1, 2);
  const auto* a =
      w.spec(CommGroup::shard, engine::Op::issue_weights, CollectiveKind::broadcast, 1'250'000);
  w.all(Builder()
            .phase(Phase::forward_comm, true)
            .issue(a, Stream::weights)
            .issue(a, Stream::weights)
            .wait(1)
            .p);
  const auto r = project::replay(w.w, m, 1);
  EXPECT_NEAR(ms(r, 0, Phase::step), 2.0, kTol);
}

TEST(ReplayTimeline, ComputeHiddenBehindCommunication) {
  // Issue a 2 ms broadcast, compute 0.5 ms, wait: the step is the broadcast (2 ms), of which
  // 1.5 ms is exposed.
  const auto m = project::testing::measured_machine(2, 0, 5);
  World w(1, 2);
  const auto* a =
      w.spec(CommGroup::shard, engine::Op::issue_weights, CollectiveKind::broadcast, 2'500'000);
  w.all(Builder()
            .phase(Phase::forward_comm, true)
            .issue(a, Stream::weights)
            .phase(Phase::forward_compute, false)
            .compute(0.5e-3)
            .phase(Phase::forward_comm, true)
            .wait(0)
            .p);
  const auto r = project::replay(w.w, m, 1);
  EXPECT_NEAR(ms(r, 0, Phase::step), 2.0, kTol);
  EXPECT_NEAR(ms(r, 0, Phase::forward_compute), 0.5, kTol);
  EXPECT_NEAR(ms(r, 0, Phase::exposed_comm), 1.5, kTol);
}

TEST(ReplayTimeline, CommunicationHiddenBehindCompute) {
  // The reverse: 3 ms of compute hide the 2 ms broadcast; nothing is exposed, and a step's end
  // still waits for the streams to drain (here: already done).
  const auto m = project::testing::measured_machine(2, 0, 5);
  World w(1, 2);
  const auto* a =
      w.spec(CommGroup::shard, engine::Op::issue_weights, CollectiveKind::broadcast, 2'500'000);
  w.all(Builder()
            .phase(Phase::forward_comm, true)
            .issue(a, Stream::weights)
            .phase(Phase::forward_compute, false)
            .compute(3e-3)
            .phase(Phase::forward_comm, true)
            .wait(0)
            .p);
  const auto r = project::replay(w.w, m, 1);
  EXPECT_NEAR(ms(r, 0, Phase::step), 3.0, kTol);
  EXPECT_NEAR(ms(r, 0, Phase::exposed_comm), 0.0, kTol);
}

TEST(ReplayTimeline, OnACpuCommunicationDoesNotOverlapCompute) {
  // The host backend: the rank's core moves the bytes. Issue a 2 ms broadcast, then compute
  // 0.5 ms: the compute starts when the broadcast ends, the step takes 2.5 ms, all of the
  // broadcast exposed.
  const auto m = project::testing::measured_machine(2, 0, 5, "cpu");
  World w(1, 2);
  const auto* a =
      w.spec(CommGroup::shard, engine::Op::issue_weights, CollectiveKind::broadcast, 2'500'000);
  w.all(Builder()
            .phase(Phase::forward_comm, true)
            .issue(a, Stream::weights)
            .phase(Phase::forward_compute, false)
            .compute(0.5e-3)
            .phase(Phase::forward_comm, true)
            .wait(0)
            .p);
  const auto r = project::replay(w.w, m, 1);
  EXPECT_NEAR(ms(r, 0, Phase::step), 2.5, kTol);
  EXPECT_NEAR(ms(r, 0, Phase::exposed_comm), 2.0, kTol);
  EXPECT_NEAR(ms(r, 0, Phase::forward_compute), 0.5, kTol);
}

TEST(ReplayTimeline, TheStepEndsWhenTheStreamsDrain) {
  // A 2 ms reduce issued and never waited (as the last group's in some schedules): the step
  // ends at 2 ms (end_step joins the weights and reduce streams), the phases do not see it.
  const auto m = project::testing::measured_machine(2, 0, 5);
  World w(1, 2);
  const auto* a =
      w.spec(CommGroup::shard, engine::Op::issue_reduce, CollectiveKind::reduce, 2'500'000);
  w.all(Builder().phase(Phase::backward_comm, true).issue(a, Stream::reduce).compute(0.5e-3).p);
  const auto r = project::replay(w.w, m, 1);
  EXPECT_NEAR(ms(r, 0, Phase::step), 2.0, kTol);
  EXPECT_NEAR(ms(r, 0, Phase::backward_comm), 0.5, kTol);
}

TEST(ReplayTimeline, RowsAndColumnsOnDifferentLinksDoNotShare) {
  // 2 rows × 2 columns, 2 ranks per NVLink domain: rows are inside a domain (NVLink), columns
  // span two (the NIC). A row broadcast and a column broadcast at once each take their time
  // alone; two row broadcasts on the same ranks would share.
  const auto m = project::testing::nccl_machine(2, 100, 10);
  World w(2, 2);
  // 1e8 B each: row: 8.4 + 1·3.4 µs + 1 ms; column (1 rank per domain, 10 GB/s):
  // 8.4 + 9.6 µs + 10 ms.
  const auto* row =
      w.spec(CommGroup::shard, engine::Op::issue_weights, CollectiveKind::broadcast, 25'000'000);
  const auto* col =
      w.spec(CommGroup::replicate, engine::Op::publish, CollectiveKind::broadcast, 25'000'000);
  w.all(Builder()
            .phase(Phase::forward_comm, true)
            .issue(row, Stream::weights)
            .issue(col, Stream::replicate)
            .wait(0)
            .phase(Phase::backward_comm, true)
            .wait(1)
            .p);
  const auto r = project::replay(w.w, m, 1);
  EXPECT_NEAR(ms(r, 3, Phase::forward_comm), (8.4 + 3.4) * 1e-3 + 1.0, kTol);
  EXPECT_NEAR(ms(r, 3, Phase::step), (8.4 + 9.6) * 1e-3 + 10.0, kTol);
}

TEST(ReplayTimeline, StepsFollowEachOther) {
  // Two steps of 0.81 ms each: the second starts where the first ended.
  const auto m = project::testing::measured_machine(4, 10, 5);
  World w(1, 4);
  const auto* b =
      w.spec(CommGroup::shard, engine::Op::issue_weights, CollectiveKind::broadcast, 1'000'000);
  w.all(Builder().phase(Phase::forward_comm, true).issue(b, Stream::weights).wait(0).p);
  const auto r = project::replay(w.w, m, 2);
  EXPECT_NEAR(ms(r, 0, Phase::step, 1), 0.81, kTol);
}

TEST(ReplayTimeline, EveryStepStartsFromTheBarrier) {
  // No collective at all: rank 0 computes 1 ms per step, rank 1 3 ms (it owns more
  // Newton–Schulz). Step 2 of rank 0 starts at the barrier at 3 ms, so its step stays 1 ms and
  // the 2 ms lead is its step_sync (never exposed communication); rank 1 waits 0. A rank's
  // first step has no barrier before it.
  const auto m = project::testing::measured_machine(2, 10, 5);
  World w(1, 2);
  w.w.programs = {Builder().phase(Phase::optimizer_ns, false).compute(1e-3).p,
                  Builder().phase(Phase::optimizer_ns, false).compute(3e-3).p};
  w.w.program_of_rank = {0, 1};
  const auto r = project::replay(w.w, m, 3);
  for (int s = 0; s < 3; ++s) {
    EXPECT_NEAR(ms(r, 0, Phase::step, s), 1.0, kTol);
    EXPECT_NEAR(ms(r, 1, Phase::step, s), 3.0, kTol);
    EXPECT_NEAR(ms(r, 0, Phase::step_sync, s), s == 0 ? 0.0 : 2.0, kTol);
    EXPECT_NEAR(ms(r, 1, Phase::step_sync, s), 0.0, kTol);
    EXPECT_NEAR(ms(r, 0, Phase::exposed_comm, s), 0.0, kTol);
  }
  // With a broadcast rooted at the slow rank first in every step, the lead would otherwise be
  // spent waiting for it: after the barrier, the fast rank waits only for the transfer.
  World b(1, 2);
  const auto* bc =
      b.spec(CommGroup::shard, engine::Op::issue_weights, CollectiveKind::broadcast, 1'000'000, 1);
  b.w.programs = {Builder()
                      .phase(Phase::forward_comm, true)
                      .issue(bc, Stream::weights)
                      .wait(0)
                      .phase(Phase::optimizer_ns, false)
                      .compute(1e-3)
                      .p,
                  Builder()
                      .phase(Phase::forward_comm, true)
                      .issue(bc, Stream::weights)
                      .wait(0)
                      .phase(Phase::optimizer_ns, false)
                      .compute(3e-3)
                      .p};
  b.w.program_of_rank = {0, 1};
  const auto rb = project::replay(b.w, m, 2);
  // 2 ranks: α = 10 µs, 4 MB at 5 GB/s = 0.8 ms.
  EXPECT_NEAR(ms(rb, 0, Phase::exposed_comm, 1), 0.81, kTol);
  EXPECT_NEAR(ms(rb, 0, Phase::step_sync, 1), 2.0, kTol);
  EXPECT_NEAR(ms(rb, 0, Phase::step, 1), 1.81, kTol);
}

TEST(ReplayTimeline, MismatchedBatchesAndDeadlocksAreErrors) {
  const auto m = project::testing::measured_machine(2, 10, 5);
  World w(1, 2);
  const auto* a =
      w.spec(CommGroup::shard, engine::Op::issue_weights, CollectiveKind::broadcast, 10);
  const auto* b =
      w.spec(CommGroup::shard, engine::Op::issue_weights, CollectiveKind::broadcast, 20);
  w.w.programs = {Builder().issue(a, Stream::weights).wait(0).p,
                  Builder().issue(b, Stream::weights).wait(0).p};
  w.w.program_of_rank = {0, 1};
  EXPECT_THROW((void)project::replay(w.w, m, 1), RuntimeFailure);
  // Rank 1 never issues: rank 0 waits forever.
  World d(1, 2);
  const auto* c =
      d.spec(CommGroup::shard, engine::Op::issue_weights, CollectiveKind::broadcast, 10);
  d.w.programs = {Builder().issue(c, Stream::weights).wait(0).p, Builder().compute(1e-3).p};
  d.w.program_of_rank = {0, 1};
  try {
    (void)project::replay(d.w, m, 1);
    FAIL() << "no deadlock reported";
  } catch (const RuntimeFailure& e) {
    EXPECT_NE(std::string(e.what()).find("projection deadlock: rank 0"), std::string::npos)
        << e.what();
  }
}

TEST(ReplayTimeline, APreviousStepWaitWaitsForTheLastStepsBroadcast) {
  // Each step: wait for the previous step's column broadcast (2 ms, on the replicate stream,
  // which a step's end does not join), compute 1 ms, issue this step's. Step 1 waits for
  // nothing and ends at 1 ms; step 2 starts there, waits until 3 ms, computes to 4 ms (3 ms);
  // step 3 from 4 ms waits until 6 ms, ends at 7 ms (3 ms).
  const auto m = project::testing::measured_machine(2, 0, 5);
  World w(2, 1);
  const auto* pub =
      w.spec(CommGroup::replicate, engine::Op::publish, CollectiveKind::broadcast, 2'500'000);
  Builder b;
  Instruction prev;
  prev.kind = Instruction::wait;
  prev.comm = static_cast<std::uint8_t>(CommGroup::replicate);
  prev.back = 1;  // none before it in this step, the previous step's only (and last) one
  b.p.code.push_back(prev);
  b.phase(Phase::optimizer_ns, false).compute(1e-3).issue(pub, Stream::replicate);
  w.all(b.p);
  const auto r = project::replay(w.w, m, 3);
  for (int q = 0; q < 2; ++q) {
    EXPECT_NEAR(ms(r, q, Phase::step, 0), 1.0, kTol);
    EXPECT_NEAR(ms(r, q, Phase::step, 1), 3.0, kTol);
    EXPECT_NEAR(ms(r, q, Phase::step, 2), 3.0, kTol);
  }
}

// Compute under communication (compute_contention.hpp): 100 SMs, each collective kernel holds
// 20 while it runs; an instruction's sm_seconds then take 100/80 as long (two kernels: 100/60).
// No latency, 5 GB/s: a 5 MB broadcast alone takes 1 ms.
struct Contended {
  World w{1, 2};
  const project::BatchSpec* spec(engine::Op op, CollectiveKind k, std::int64_t count) {
    return w.spec(CommGroup::shard, op, k, count);
  }
  // Both ranks run `p`: the step and `phase` (the phase of all of p's compute) take `expect` ms.
  void expect(const project::RankProgram& p, Phase phase, double expect_ms) {
    w.all(p);
    const auto m = project::testing::measured_machine(2, 0, 5, "gpu", 100, 100, 20);
    const auto r = project::replay(w.w, m, 1);
    EXPECT_NEAR(ms(r, 0, Phase::step), expect_ms, kTol);
    EXPECT_NEAR(ms(r, 1, phase), expect_ms, kTol);
  }
};

TEST(ReplayTimeline, ComputeSlowsWhileACollectiveHoldsSMs) {
  // 2 ms of compute, 1.6 of them on the SMs: 2 + 1.6 · 20/80 = 2.4 ms while the broadcast runs
  // (0 to 1 ms: 5/12 done), the other 7/12 at 2 ms after it: 1 + 7/6 ms. Memory-bound compute
  // (no sm_seconds) keeps its 2 ms.
  for (const double sm : {1.6e-3, 0.0}) {
    Contended c;
    const auto* a = c.spec(engine::Op::issue_weights, CollectiveKind::broadcast, 1'250'000);
    c.expect(Builder()
                 .phase(Phase::forward_compute, false)
                 .issue(a, Stream::weights)
                 .compute(2e-3, sm)
                 .wait(0)
                 .p,
             Phase::forward_compute, sm > 0 ? 1.0 + 7.0 / 6.0 : 2.0);
  }
}

TEST(ReplayTimeline, TwoRunningCollectivesHoldTwiceTheSMs) {
  // The link is shared: B (0.5 ms alone) ends at 1 ms, A (1 ms alone) at 1.5 ms. Compute at
  // 2 + 1.6 · 40/60 ms while both run (15/46 done at 1 ms), at 2.4 ms while A alone runs (5/24
  // more by 1.5 ms), the rest at 2 ms: 1.5 + 2 · (1 − 15/46 − 5/24) ms.
  Contended c;
  const auto* a = c.spec(engine::Op::issue_weights, CollectiveKind::broadcast, 1'250'000);
  const auto* b = c.spec(engine::Op::issue_reduce, CollectiveKind::reduce, 625'000);
  c.expect(Builder()
               .phase(Phase::backward_compute, false)
               .issue(a, Stream::weights)
               .issue(b, Stream::reduce)
               .compute(2e-3, 1.6e-3)
               .wait(0)
               .wait(1)
               .p,
           Phase::backward_compute, 1.5 + 2.0 * (1.0 - 15.0 / 46.0 - 5.0 / 24.0));
}

TEST(ReplayTimeline, AStage2BatchHoldsSMsFromItsStage1BatchsEnd) {
  // A (reduce-scatter, 5 MB per rank: 5 MB on the wire) runs 0 to 1 ms, B launches when A ends
  // and runs 1 to 2 ms: 20 SMs held throughout, 3 + 2.4 · 20/80 = 3.6 ms per instruction (2/3.6
  // done by 2 ms), the rest at 3 ms.
  Contended c;
  const auto* a = c.spec(engine::Op::issue_reduce, CollectiveKind::reduce_scatter, 1'250'000);
  const auto* b = c.spec(engine::Op::issue_weights, CollectiveKind::broadcast, 1'250'000);
  c.expect(Builder()
               .phase(Phase::backward_compute, false)
               .issue(a, Stream::reduce)
               .issue_after(b, Stream::replicate, 0)
               .compute(3e-3, 2.4e-3)
               .wait(1)
               .p,
           Phase::backward_compute, 2.0 + 3.0 * (1.0 - 2.0 / 3.6));
}

TEST(ProgramStore, ReadsBackEveryProgramAndSharesWhatRanksHaveInCommon) {
  // 400 issues on distinct groups with compute between them; rank B differs from A in one
  // compute in the middle, rank C has one more instruction at the start.
  World w(1, 2);
  std::vector<const project::BatchSpec*> specs;
  for (int g = 0; g < 400; ++g) {
    project::BatchSpec s;
    s.comm = CommGroup::shard;
    s.op = engine::Op::issue_weights;
    s.group = g;
    s.calls.push_back({CollectiveKind::all_gather, 10, 4, -1});
    w.w.specs.push_back(s);
    specs.push_back(&w.w.specs.back());
  }
  auto program = [&](double middle, bool extra) {
    Builder b;
    if (extra) b.phase(Phase::optimizer_ns, false);
    for (int g = 0; g < 400; ++g)
      b.issue(specs[static_cast<std::size_t>(g)], Stream::weights)
          .compute(g == 200 ? middle : 1e-3)
          .wait(g);
    return b.p;
  };
  const auto a = program(1e-3, false), b = program(2e-3, false), c = program(1e-3, true);
  project::ProgramStore store;
  const int ia = store.add(a), ib = store.add(b), ic = store.add(c), ia2 = store.add(a);
  EXPECT_EQ(store.size(), 4U);
  const std::pair<int, const project::RankProgram*> all[] = {
      {ia, &a}, {ib, &b}, {ic, &c}, {ia2, &a}};
  for (const auto& [id, p] : all) {
    std::vector<Instruction> read;
    for (std::uint32_t c : store.chunks_of(id))
      read.insert(read.end(), store.chunk_begin(c), store.chunk_end(c));
    EXPECT_TRUE(read == p->code) << "program " << id;
  }
  // About 25 chunks of 48 instructions: B and C add one or two chunks each, A again nothing.
  const std::size_t n = a.code.size();
  EXPECT_GT(store.chunk_count(), 10U);
  EXPECT_LT(store.instruction_count(), n + n / 4);
  EXPECT_GT(store.instruction_count(), n);
}

namespace rank_classes {

// A batch spec on the rows whose issue ends a program chunk (program_store.hpp cuts after
// issues whose group hashes so), found through the store itself.
const project::BatchSpec* chunk_ending_spec(World& w, int from_group, int root) {
  for (int g = from_group;; ++g) {
    const auto* s = w.spec(CommGroup::shard, engine::Op::issue_weights, CollectiveKind::broadcast,
                           1'000'000, root);
    w.w.specs.back().group = g;
    project::ProgramStore probe{Builder().issue(s, Stream::weights).compute(1e-3).p};
    if (probe.chunk_count() == 2) return s;
  }
}

TEST(ReplayRankClasses, PartWhereProgramsDifferAndMergeWhenBlockedAlike) {
  // 4 ranks, α = 10 µs, β = 5 GB/s: a 4 MB broadcast takes d = 0.81 ms. Each program is
  //   [optimizer_ns] compute c1 · issue X (root 2) | [forward_comm, exposed] wait X ·
  //   [backward_compute] compute c2 · issue Y (root 1) | [forward_comm, exposed] wait Y
  // with '|' a chunk boundary. c1 = 3 ms on rank 2 (it "owns" more), 1 ms elsewhere; c2 = 2 ms
  // on rank 1, 1 ms elsewhere. By hand: X is ready at 3 ms, ends at 3.81; every rank waits
  // for it (ranks 0, 1, 3 from 1 ms: forward_comm 2.81 ms; rank 2 from 3 ms: 0.81 ms). Y is
  // ready at 3.81 + 2 = 5.81 (rank 1), ends at 6.62; ranks 0, 2, 3 wait from 4.81 (forward_comm
  // 1.81 more), rank 1 0.81. Step = 6.62 ms everywhere.
  // Classes: the first chunks differ for rank 2 ({0, 1, 3} and {2}), the second for rank 1
  // ({0, 3}, {1}, {2}: 3 alive); {0, 3} and {2} block on X at the same instruction and
  // continue from 3.81 alike: merged; {1} joins them when both wait for Y in the last chunk.
  const auto m = project::testing::measured_machine(4, 10, 5);
  World w(1, 4);
  const auto* x = chunk_ending_spec(w, 0, 2);
  const auto* y = chunk_ending_spec(w, x->group + 1, 1);
  auto program = [&](double c1, double c2) {
    return Builder()
        .phase(Phase::optimizer_ns, false)
        .compute(c1)
        .issue(x, Stream::weights)
        .phase(Phase::forward_comm, true)
        .wait(0)
        .phase(Phase::backward_compute, false)
        .compute(c2)
        .issue(y, Stream::weights)
        .phase(Phase::forward_comm, true)
        .wait(1)
        .p;
  };
  w.w.programs = {program(1e-3, 1e-3), program(3e-3, 1e-3), program(1e-3, 2e-3)};
  w.w.program_of_rank = {0, 2, 1, 0};
  for (auto grouping : {project::ReplayGrouping::rank_classes, project::ReplayGrouping::per_rank}) {
    const auto r = project::replay(w.w, m, 2, nullptr, grouping);
    const bool classes = grouping == project::ReplayGrouping::rank_classes;
    for (int step = 0; step < 2; ++step) {
      const double ns[] = {1, 1, 3, 1}, fwd[] = {2.81 + 1.81, 2.81 + 0.81, 0.81 + 1.81, 4.62};
      const double bwd[] = {1, 2, 1, 1};
      for (int q = 0; q < 4; ++q) {
        const std::string what = (classes ? "classes" : "alone") + std::string(" rank ") +
                                 std::to_string(q) + " step " + std::to_string(step);
        EXPECT_NEAR(ms(r, q, Phase::step, step), 6.62, kTol) << what;
        EXPECT_NEAR(ms(r, q, Phase::optimizer_ns, step), ns[q], kTol) << what;
        EXPECT_NEAR(ms(r, q, Phase::forward_comm, step), fwd[q], kTol) << what;
        EXPECT_NEAR(ms(r, q, Phase::exposed_comm, step), fwd[q], kTol) << what;
        EXPECT_NEAR(ms(r, q, Phase::backward_compute, step), bwd[q], kTol) << what;
        EXPECT_NEAR(ms(r, q, Phase::step_sync, step), 0, kTol) << what;
      }
    }
    // The roots count nothing for their own broadcast, the others 4 MB each.
    const auto ch = engine::channel_index(CommGroup::shard, CollectiveKind::broadcast);
    const std::int64_t bytes[] = {8'000'000, 4'000'000, 4'000'000, 8'000'000};
    for (int q = 0; q < 4; ++q) {
      EXPECT_EQ(r.calls[ch * 4 + static_cast<std::size_t>(q)], 2);
      EXPECT_EQ(r.bytes[ch * 4 + static_cast<std::size_t>(q)], bytes[q]);
    }
    if (classes) {
      // Step 1: the first class and 2 parts; step 2 starts from one class (all merged) and
      // parts the same way: 2 more.
      EXPECT_EQ(r.rank_class_max, 3);
      EXPECT_EQ(r.rank_classes, 5);
    } else {
      EXPECT_EQ(r.rank_classes, 4);
    }
  }
}

TEST(ReplayRankClasses, AClassPartingWhenItsStageOneEndsStillStartsItsStageTwo) {
  // 2 ranks, α = 10 µs, β = 5 GB/s (4 MB: 0.81 ms alone). Each program is
  //   issue S1 (reduce) · issue S2 after S1 (replicate) · wait S1 · issue X | compute c · wait X ·
  //   wait S2
  // with '|' a chunk boundary and c = 1 ms on rank 0, 2 ms on rank 1: the class of both ranks
  // parts there, while S1's end runs its waiters and before S2 arrives on its stream. S1 ends at
  // 0.81 ms; S2 and X then share the link (1.6 ms each): both end at 2.42. Rank 0's step ends
  // there, rank 1's at 0.81 + 2 = 2.81.
  const auto m = project::testing::measured_machine(2, 10, 5);
  World w(1, 2);
  const auto* x = chunk_ending_spec(w, 0, 0);
  const auto* s1 =
      w.spec(CommGroup::shard, engine::Op::issue_reduce, CollectiveKind::reduce, 1'000'000);
  const auto* s2 =
      w.spec(CommGroup::shard, engine::Op::issue_stage2, CollectiveKind::broadcast, 1'000'000);
  auto program = [&](double c) {
    return Builder()
        .phase(Phase::backward_compute, false)
        .issue(s1, Stream::reduce)
        .issue_after(s2, Stream::replicate, 0)
        .wait(0)
        .issue(x, Stream::weights)
        .compute(c)
        .wait(2)
        .wait(1)
        .p;
  };
  w.w.programs = {program(1e-3), program(2e-3)};
  w.w.program_of_rank = {0, 1};
  for (auto grouping : {project::ReplayGrouping::rank_classes, project::ReplayGrouping::per_rank}) {
    const auto r = project::replay(w.w, m, 1, nullptr, grouping);
    EXPECT_NEAR(ms(r, 0, Phase::step), 2.42, kTol);
    EXPECT_NEAR(ms(r, 1, Phase::step), 2.81, kTol);
  }
}

}  // namespace rank_classes

}  // namespace

namespace {

// The reference's DMuon run model (engine::StepRunModel): no barrier, a communicator in issue
// order, rooted calls of a batch in series.
engine::StepRunModel reference_model() {
  engine::StepRunModel m;
  m.barrier = false;
  m.comm_issue_order = true;
  m.serial_rooted_calls = true;
  return m;
}

}  // namespace

TEST(ReplayTimeline, WithoutABarrierTheNextForwardWaitsForTheOwnersOptimizer) {
  // EveryStepStartsFromTheBarrier's second world without the barrier: a broadcast rooted at
  // rank 1 (0.81 ms), then rank 0 computes 1 ms, rank 1 (the owner) 3 ms. Step 1: both end the
  // broadcast at 0.81, rank 0 ends at 1.81, rank 1 at 3.81. Step 2: rank 0 starts at 1.81 and
  // its broadcast waits for the owner to issue it at 3.81 (the end of its optimizer): 3.81 to
  // 4.62, so rank 0 waits 2.81 ms in its forward and ends at 5.62 (a 3.81 ms step); rank 1
  // ends at 4.62 + 3 = 7.62 (3.81 ms). No step_sync.
  const auto m = project::testing::measured_machine(2, 10, 5);
  World b(1, 2);
  b.w.run_model = reference_model();
  const auto* bc =
      b.spec(CommGroup::shard, engine::Op::issue_weights, CollectiveKind::broadcast, 1'000'000, 1);
  auto program = [&](double ns) {
    return Builder()
        .phase(Phase::forward_comm, true)
        .issue(bc, Stream::weights)
        .wait(0)
        .phase(Phase::optimizer_ns, false)
        .compute(ns)
        .p;
  };
  b.w.programs = {program(1e-3), program(3e-3)};
  b.w.program_of_rank = {0, 1};
  const auto r = project::replay(b.w, m, 3);
  EXPECT_NEAR(ms(r, 0, Phase::step, 0), 1.81, kTol);
  EXPECT_NEAR(ms(r, 1, Phase::step, 0), 3.81, kTol);
  for (int s = 1; s < 3; ++s) {
    EXPECT_NEAR(ms(r, 0, Phase::exposed_comm, s), 2.81, kTol);
    EXPECT_NEAR(ms(r, 0, Phase::step, s), 3.81, kTol);
    EXPECT_NEAR(ms(r, 1, Phase::exposed_comm, s), 0.81, kTol);
    EXPECT_NEAR(ms(r, 1, Phase::step, s), 3.81, kTol);
    for (int q = 0; q < 2; ++q) EXPECT_NEAR(ms(r, q, Phase::step_sync, s), 0.0, kTol);
  }
}

TEST(ReplayTimeline, ACommunicatorRunsItsBatchesInIssueOrder) {
  // LatencyIsNotShared's two batches (α = 0.5 ms; A 1 ms of transfer on the weights stream, B
  // 3 ms on the reduce stream, same communicator) with the communicator in issue order: B does
  // not share the link with A but starts when A ends, 1.5 ms; it ends at 1.5 + 0.5 + 3 = 5.
  const auto m = project::testing::measured_machine(2, 500, 5);
  World w(1, 2);
  w.w.run_model.comm_issue_order = true;
  const auto* a =
      w.spec(CommGroup::shard, engine::Op::issue_weights, CollectiveKind::broadcast, 1'250'000);
  const auto* b =
      w.spec(CommGroup::shard, engine::Op::issue_reduce, CollectiveKind::reduce, 3'750'000);
  w.all(Builder()
            .phase(Phase::forward_comm, true)
            .issue(a, Stream::weights)
            .issue(b, Stream::reduce)
            .wait(0)
            .phase(Phase::backward_comm, true)
            .wait(1)
            .p);
  const auto r = project::replay(w.w, m, 1);
  EXPECT_NEAR(ms(r, 0, Phase::forward_comm), 1.5, kTol);
  EXPECT_NEAR(ms(r, 0, Phase::backward_comm), 3.5, kTol);
  EXPECT_NEAR(ms(r, 0, Phase::step), 5.0, kTol);
  // A reduce cannot overtake a queued prefetch: two 1 ms broadcasts queued on the weights
  // stream, then a 1 ms reduce (no latency). The reduce waits for both: 2 to 3 ms.
  const auto m0 = project::testing::measured_machine(2, 0, 5);
  World q(1, 2);
  q.w.run_model.comm_issue_order = true;
  const auto* one =
      q.spec(CommGroup::shard, engine::Op::issue_weights, CollectiveKind::broadcast, 1'250'000);
  const auto* red =
      q.spec(CommGroup::shard, engine::Op::issue_reduce, CollectiveKind::reduce, 1'250'000);
  q.all(Builder()
            .phase(Phase::backward_comm, true)
            .issue(one, Stream::weights)
            .issue(one, Stream::weights)
            .issue(red, Stream::reduce)
            .wait(2)
            .p);
  const auto rq = project::replay(q.w, m0, 1);
  EXPECT_NEAR(ms(rq, 0, Phase::backward_comm), 3.0, kTol);
  // Without the rule the reduce shares the link with the first broadcast from 0: both end at
  // 2 ms, the second broadcast then runs alone to 3 ms; the reduce's wait ends at 2.
  q.w.run_model.comm_issue_order = false;
  const auto rf = project::replay(q.w, m0, 1);
  EXPECT_NEAR(ms(rf, 0, Phase::backward_comm), 2.0, kTol);
  EXPECT_NEAR(ms(rf, 0, Phase::step), 3.0, kTol);
}

TEST(ReplayTimeline, RootedCallsOfOneBatchPayTheirLatenciesInSeries) {
  // One batch of three broadcasts from roots 0, 1, 0 (α = 10 µs measured per call, 4 MB each
  // at 5 GB/s = 0.8 ms): concurrent, 10 µs + 2.4 ms; in series, 3 · 10 µs + 2.4 ms.
  const auto m = project::testing::measured_machine(2, 10, 5);
  for (bool serial : {false, true}) {
    World w(1, 2);
    w.w.run_model.serial_rooted_calls = serial;
    project::BatchSpec spec;
    spec.comm = CommGroup::shard;
    spec.op = engine::Op::issue_weights;
    spec.group = 0;
    for (int root : {0, 1, 0})
      spec.calls.push_back({CollectiveKind::broadcast, 1'000'000, 4, root});
    w.w.specs.push_back(spec);
    w.all(Builder()
              .phase(Phase::forward_comm, true)
              .issue(&w.w.specs.back(), Stream::weights)
              .wait(0)
              .p);
    const auto r = project::replay(w.w, m, 1);
    EXPECT_NEAR(ms(r, 1, Phase::step), serial ? 2.43 : 2.41, kTol) << serial;
  }
}
