// StepTrace (dmuon_bench --trace on any backend) with a scripted clock: the host's way (a batch
// ends when the rank sees it complete, overlapping batches of one stream on lanes) and the
// CUDA way (a batch ends in its stream's order; stamps read only once readable). Expected
// spans are written out by hand from the script.

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <vector>

#include "dmuon/engine/exec/step_trace.hpp"

namespace {

using namespace dmuon;
using namespace dmuon::engine;

// Time is what the test says it is; every stamp remembers where it was taken.
class ScriptedClock final : public TraceClock {
 public:
  explicit ScriptedClock(bool stream_ordered) : stream_ordered_(stream_ordered) {}
  double now = 0;
  std::set<std::size_t> unreadable;
  std::vector<int> where;  // per mark: -1 compute, else the stream
  std::size_t released = 0;

  std::size_t mark_compute() override { return stamp(-1); }
  std::size_t mark(Stream s) override { return stamp(static_cast<int>(s)); }
  bool readable(std::size_t m) override { return unreadable.count(m) == 0; }
  double seconds(std::size_t m) override { return times_.at(m); }
  void release(std::size_t) override { ++released; }
  bool stream_ordered() const override { return stream_ordered_; }

 private:
  std::size_t stamp(int at) {
    times_.push_back(now);
    where.push_back(at);
    return times_.size() - 1;
  }
  bool stream_ordered_;
  std::vector<double> times_;
};

TraceSpan batch(const char* name, int group) {
  TraceSpan s;
  s.name = name;
  s.group = group;
  s.calls = 1;
  s.payload_bytes = 64;
  s.counted_bytes = 32;
  s.comm = "row";
  return s;
}

const TraceSpan& named(const Trace& t, const std::string& name) {
  for (const auto& s : t.spans())
    if (s.name == name) return s;
  throw std::runtime_error("no span " + name);
}

TEST(StepTrace, HostBatchesEndWhenSeenCompleteAndOverlapOnLanes) {
  Trace trace({3}, 4, "measured");
  ScriptedClock clock(/*stream_ordered=*/false);
  StepTrace st(trace, clock, 3);
  st.begin_step(2);
  int a = 0, b = 0, c = 0;
  clock.now = 1;
  st.issued(&a, st.mark(Stream::reduce), Stream::reduce, batch("issue_reduce g0", 0), true);
  clock.now = 2;
  st.issued(&b, st.mark(Stream::reduce), Stream::reduce, batch("issue_reduce g1", 1), true);
  clock.now = 3;
  st.completed(&b);  // b ends first: a still holds lane 0
  clock.now = 4;
  st.completed(&a);
  st.completed(&a);  // seen twice: once only
  clock.now = 5;
  // Lane 0 is free again; a batch complete at issue is a zero-length span.
  st.issued(&c, st.mark(Stream::weights), Stream::weights, batch("issue_weights g2", 2), false);
  const std::size_t t0 = st.mark_compute();
  clock.now = 7;
  st.close(TraceTrack::compute, "forward g2", t0);
  st.flush(false);
  ASSERT_EQ(trace.spans().size(), 4u);
  const auto& sa = named(trace, "issue_reduce g0");
  EXPECT_EQ(sa.track, TraceTrack::reduce);
  EXPECT_EQ(sa.lane, 0);
  EXPECT_EQ(sa.start_s, 1);
  EXPECT_EQ(sa.duration_s, 3);  // 1 -> 4
  EXPECT_EQ(sa.rank, 3);
  EXPECT_EQ(sa.step, 1);  // 0-based
  EXPECT_EQ(sa.counted_bytes, 32);
  const auto& sb = named(trace, "issue_reduce g1");
  EXPECT_EQ(sb.lane, 1);
  EXPECT_EQ(sb.start_s, 2);
  EXPECT_EQ(sb.duration_s, 1);
  const auto& sc = named(trace, "issue_weights g2");
  EXPECT_EQ(sc.track, TraceTrack::weights);
  EXPECT_EQ(sc.lane, 0);
  EXPECT_EQ(sc.duration_s, 0);
  const auto& f = named(trace, "forward g2");
  EXPECT_EQ(f.track, TraceTrack::compute);
  EXPECT_EQ(f.start_s, 5);
  EXPECT_EQ(f.duration_s, 2);
  EXPECT_EQ(clock.released, 8u);  // two stamps per span, each read once
}

TEST(StepTrace, StreamOrderedBatchesEndInTheirStreamAndWaitToBeReadable) {
  Trace trace({0}, 1, "measured");
  ScriptedClock clock(/*stream_ordered=*/true);
  StepTrace st(trace, clock, 0);
  st.begin_step(1);
  int a = 0, b = 0;
  clock.now = 1;
  const std::size_t start_a = st.mark(Stream::replicate);
  clock.now = 2;  // the event after the collectives, recorded right after queueing them
  st.issued(&a, start_a, Stream::replicate, batch("issue_replicate g0", 0), true);
  clock.now = 3;
  const std::size_t start_b = st.mark(Stream::reduce);
  clock.now = 6;
  st.issued(&b, start_b, Stream::reduce, batch("issue_reduce g0", 0), true);
  clock.now = 9;
  st.completed(&b);  // when the host saw it does not matter here
  // Both ends were stamped on the batches' own streams, not the compute queue.
  EXPECT_EQ(clock.where[1], static_cast<int>(Stream::replicate));
  EXPECT_EQ(clock.where[3], static_cast<int>(Stream::reduce));
  // The replicate broadcast is still running after the step's synchronisation.
  clock.unreadable.insert(1);
  st.flush(false);
  ASSERT_EQ(trace.spans().size(), 1u);
  EXPECT_EQ(trace.spans()[0].name, "issue_reduce g0");
  EXPECT_EQ(trace.spans()[0].start_s, 3);
  EXPECT_EQ(trace.spans()[0].duration_s, 3);  // 3 -> 6, not 9
  EXPECT_EQ(trace.spans()[0].lane, 0);
  // Next step: it finished; it keeps the step it was issued in.
  clock.unreadable.clear();
  st.begin_step(2);
  st.flush(false);
  ASSERT_EQ(trace.spans().size(), 2u);
  const auto& r = named(trace, "issue_replicate g0");
  EXPECT_EQ(r.step, 0);
  EXPECT_EQ(r.track, TraceTrack::replicate);
  EXPECT_EQ(r.start_s, 1);
  EXPECT_EQ(r.duration_s, 1);
}

TEST(StepTrace, FlushAllReadsEverythingLeft) {
  Trace trace({0}, 1, "measured");
  ScriptedClock clock(true);
  StepTrace st(trace, clock, 0);
  st.begin_step(1);
  const std::size_t t0 = st.mark_compute();
  clock.now = 2;
  st.close(TraceTrack::phases, "forward_compute", t0, /*exposed=*/true);
  clock.unreadable = {0, 1};
  st.flush(false);
  EXPECT_TRUE(trace.spans().empty());
  st.flush(true);  // the run's end: every stream was joined
  ASSERT_EQ(trace.spans().size(), 1u);
  EXPECT_TRUE(trace.spans()[0].exposed);
  EXPECT_EQ(trace.spans()[0].duration_s, 2);
}

TEST(WallTraceClock, MarksAreMonotonicSecondsFromTheFirst) {
  WallTraceClock c;
  const std::size_t a = c.mark_compute();
  const std::size_t b = c.mark(Stream::reduce);
  EXPECT_EQ(c.seconds(a), 0);
  EXPECT_GE(c.seconds(b), 0);
  EXPECT_TRUE(c.readable(b));
  EXPECT_FALSE(c.stream_ordered());
  c.release(a);
  const std::size_t d = c.mark_compute();  // a's slot reused
  EXPECT_EQ(d, a);
  EXPECT_GE(c.seconds(d), c.seconds(b));
}

}  // namespace
