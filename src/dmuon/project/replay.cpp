#include "dmuon/project/replay.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <queue>
#include <unordered_map>

#include "dmuon/base/error.hpp"
#include "dmuon/base/trace.hpp"
#include "dmuon/project/collective_cost.hpp"
#include "dmuon/project/link_network.hpp"
#include "dmuon/project/program_store.hpp"

namespace dmuon::project {
namespace {

using engine::CommGroup;
using engine::kChannelCount;
using engine::kPhaseCount;
using engine::Phase;

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Tally;

struct Batch {
  const BatchSpec* spec = nullptr;
  CommGroup comm = CommGroup::shard;
  int index = 0;  // row or column
  int members = 1;
  std::uint8_t stream = 0;
  int arrived = 0;
  double ready = 0;
  double start = -1, end = -1;
  int step = 0;                  // of its first issuer
  const Tally* tally = nullptr;  // its calls and bytes per channel (every member's)
  std::vector<int> compute_waiters;
  std::vector<std::pair<int, std::uint8_t>> dep_waiters;
};

// A batch issued on a rank's stream, not yet begun there. Its issue time is folded into
// Batch::ready when issued (the batch starts at the latest of its members' issue times, stream
// frees and dependencies), so a queue entry is 8 bytes: a communication-bound step keeps a
// whole step's batches queued on every rank.
struct Pending {
  int batch;
  int dep;
};

struct StreamState {
  std::vector<Pending> queue;
  std::size_t head = 0;
  double free_at = 0;
  bool head_arrived = false;
  int last = -1;  // the last batch issued on it (any step)
};

struct RankState {
  ProgramStore::Cursor pc;
  int step = 0;
  double clock = 0, step_start = 0, seg_start = 0;
  double step_end = 0;  // when its last step ended (it waits at the barrier from there)
  bool at_barrier = false;
  int seg_phase = -1;
  bool seg_exposed = false;
  bool paused = false;
  bool done = false;
  bool switched = false;  // the current instruction's phase switch is done (it may block)
  int blocking = -1;      // CPU machines: the batch just issued, which the compute stream waits for
  std::array<double, kPhaseCount> phases{};
  std::array<StreamState, kStreamCount> streams;
  std::array<int, engine::kCommGroupCount> seq{};  // issues so far per communicator (all steps)
  std::array<int, engine::kCommGroupCount> instance{};  // of each communicator (RankGrid)
};

// Per-channel calls and the volume a non-root rank counts (collective_counters.hpp), and what
// the root counts differently, of one batch spec on a communicator of n ranks.
struct Tally {
  /// The channels its calls use (usually one), with their calls and non-root bytes.
  struct Channel {
    std::size_t channel;
    std::int64_t calls, uniform;
  };
  std::vector<Channel> channels;
  struct RootDelta {
    int root;
    std::size_t channel;
    std::int64_t delta;
  };
  std::vector<RootDelta> roots;
};

Tally tally(const BatchSpec& spec, int n) {
  Tally t;
  for (const auto& c : spec.calls) {
    const std::size_t ch = engine::channel_index(spec.comm, c.kind);
    const auto count = static_cast<std::size_t>(c.count);
    const std::int64_t other = comm::counted_bytes(c.kind, n, false, count, c.elem_bytes);
    auto it = std::find_if(t.channels.begin(), t.channels.end(),
                           [&](const Tally::Channel& x) { return x.channel == ch; });
    if (it == t.channels.end()) it = t.channels.insert(t.channels.end(), {ch, 0, 0});
    ++it->calls;
    it->uniform += other;
    if (c.root >= 0) {
      const std::int64_t root = comm::counted_bytes(c.kind, n, true, count, c.elem_bytes);
      if (root != other) t.roots.push_back({c.root, ch, root - other});
    }
  }
  return t;
}

class Replayer {
 public:
  Replayer(const WorldPrograms& w, const Machine& m, int steps, Trace* trace)
      : w_(w),
        m_(m),
        trace_(trace),
        steps_(steps),
        grid_(w.grid),
        net_(grid_.instances(CommGroup::shard), grid_.instances(CommGroup::replicate),
             grid_.tp > 1 ? grid_.instances(CommGroup::tp) : 0) {
    result_.steps = steps;
    result_.world = w.world;
    result_.rank_phases_ms.assign(
        static_cast<std::size_t>(steps) * static_cast<std::size_t>(w.world) * kPhaseCount, 0.0);
    rank_calls_.assign(kChannelCount * static_cast<std::size_t>(w.world), 0);
    rank_bytes_.assign(kChannelCount * static_cast<std::size_t>(w.world), 0);
    ranks_.resize(static_cast<std::size_t>(w.world));
    for (int r = 0; r < w.world; ++r) {
      auto& s = ranks_[static_cast<std::size_t>(r)];
      s.pc = ProgramStore::Cursor(w.programs, w.program_of_rank[static_cast<std::size_t>(r)]);
      for (CommGroup comm : kAllCommGroups)
        s.instance[static_cast<std::size_t>(comm)] = grid_.instance(r, comm);
    }
    // Instances per communicator: rows and columns of each DP group, the world, the TP groups.
    for (CommGroup comm : kAllCommGroups) {
      const auto c = static_cast<std::size_t>(comm);
      const int count = comm == CommGroup::tp && grid_.tp == 1 ? 0 : grid_.instances(comm);
      instances_[c].resize(static_cast<std::size_t>(count));
      spans_[c].resize(static_cast<std::size_t>(count));
      for (int i = 0; i < count; ++i) {
        // NVLink domains the members span (ranks ascend with the member index).
        const int n = grid_.group_size(comm);
        int domains = 0, last = -1;
        for (int k = 0; k < n; ++k) {
          const int d = m.domain_of(grid_.rank_of(comm, i, k));
          if (d != last) ++domains;
          last = d;
        }
        spans_[c][static_cast<std::size_t>(i)] = {n, domains};
      }
    }
  }

  ReplayResult run() {
    for (int r = 0; r < w_.world; ++r) advance(r);
    std::vector<int> finished;
    for (;;) {
      const double th = events_.empty() ? kInf : events_.top().first;
      const double tn = net_.next_event();
      if (th == kInf && tn == kInf) break;
      finished.clear();
      const double t = std::min(th, tn);
      net_.advance(t, finished);
      for (int f : finished) end_batch(flow_batch_[static_cast<std::size_t>(f)], t);
      if (th <= tn) {
        const int b = events_.top().second;
        events_.pop();
        start_batch(b, th);
      }
    }
    for (int r = 0; r < w_.world; ++r)
      if (!ranks_[static_cast<std::size_t>(r)].done) deadlock(r);
    result_.batches = static_cast<std::int64_t>(batches_.size());
    // Rank-major while counting (one cache line per issue), channel-major in the result.
    const auto world = static_cast<std::size_t>(w_.world);
    result_.calls.assign(kChannelCount * world, 0);
    result_.bytes.assign(kChannelCount * world, 0);
    for (std::size_t r = 0; r < world; ++r)
      for (std::size_t ch = 0; ch < kChannelCount; ++ch) {
        result_.calls[ch * world + r] = rank_calls_[r * kChannelCount + ch];
        result_.bytes[ch * world + r] = rank_bytes_[r * kChannelCount + ch];
      }
    return std::move(result_);
  }

 private:
  int member_rank(const Batch& b, int member) const {
    return grid_.rank_of(b.comm, b.index, member);
  }

  bool traced(int r) const { return trace_ != nullptr && trace_->traced(r); }

  void trace_span(int r, const RankState& s, TraceTrack track, std::string name, double start,
                  double end, bool exposed = false) {
    trace_->add(r, s.step, track, std::move(name), start, end, exposed);
  }

  // The compute stream waited for batch b from the clock until its end.
  void trace_wait(int r, const RankState& s, const Batch& b) {
    if (traced(r) && b.end > s.clock)
      trace_span(r, s, TraceTrack::compute,
                 fmt::format("wait {} g{}", engine::op_name(b.spec->op), b.spec->group), s.clock,
                 b.end);
  }

  void close_segment(int r, RankState& s) {
    if (s.seg_phase < 0) return;
    const double d = s.clock - s.seg_start;
    if (traced(r)) {
      trace_span(r, s, TraceTrack::phases, engine::phase_name(static_cast<Phase>(s.seg_phase)),
                 s.seg_start, s.clock, s.seg_exposed);
    }
    s.phases[static_cast<std::size_t>(s.seg_phase)] += d;
    if (s.seg_exposed) s.phases[static_cast<std::size_t>(Phase::exposed_comm)] += d;
    s.seg_phase = -1;
  }

  const Tally& tally_of(const BatchSpec* spec, int n) {
    auto it = tallies_.find(spec);
    if (it == tallies_.end()) it = tallies_.emplace(spec, tally(*spec, n)).first;
    return it->second;
  }

  // The batch issued `back` issues ago on `comm` by the rank (1 = the latest), or -1 (before its
  // first step: a previous-step wait of step 1).
  int batch_back(const RankState& s, std::uint8_t comm, int back) const {
    const int k = s.seq[comm] - back;
    if (back <= 0 || k < 0) return -1;
    return instances_[comm][static_cast<std::size_t>(s.instance[comm])]
                     [static_cast<std::size_t>(k)];
  }

  // Issues the batch; returns its id.
  int issue(int r, RankState& s, const Instruction& in) {
    const auto comm = static_cast<CommGroup>(in.comm);
    const int inst = s.instance[in.comm];
    // Stage 2: ordered after its stage-1 batch only, not after the compute stream.
    const int dep = in.dep_back > 0 ? batch_back(s, in.dep_comm, in.dep_back) : -1;
    const int k = s.seq[in.comm]++;
    auto& list = instances_[in.comm][static_cast<std::size_t>(inst)];
    const BatchSpec* spec = in.spec;
    const bool last_step = s.step == steps_ - 1;
    const int n = grid_.group_size(comm);
    if (k >= static_cast<int>(list.size())) {
      Batch b;
      b.spec = spec;
      b.comm = comm;
      b.index = inst;
      b.members = n;
      b.stream = in.stream;
      b.step = s.step;
      b.tally = &tally_of(spec, n);
      list.push_back(static_cast<int>(batches_.size()));
      batches_.push_back(std::move(b));
      if (last_step)
        for (const auto& d : batches_.back().tally->roots) {
          const int rank = member_rank(batches_.back(), d.root);
          rank_bytes_[static_cast<std::size_t>(rank) * kChannelCount + d.channel] += d.delta;
        }
    }
    const int id = list[static_cast<std::size_t>(k)];
    Batch& b = batches_[static_cast<std::size_t>(id)];
    if (w_.check_batches && (b.spec->op != spec->op || b.spec->group != spec->group ||
                             !(b.spec->calls == spec->calls) || b.stream != in.stream))
      throw RuntimeFailure(fmt::format(
          "projection: rank {} issues {} of group {} where the other ranks of its {} issue {} of "
          "group {} (batch {} on the communicator)",
          r, engine::op_name(spec->op), spec->group, comm_group_word(comm),
          engine::op_name(b.spec->op), b.spec->group, k));
    if (last_step) {
      const Tally& t = *b.tally;  // equal to this rank's own (checked above, full form)
      const std::size_t at = static_cast<std::size_t>(r) * kChannelCount;
      for (const auto& c : t.channels) {
        rank_calls_[at + c.channel] += c.calls;
        rank_bytes_[at + c.channel] += c.uniform;
      }
    }
    Pending p{id, -1};
    if (in.dep_back > 0)
      p.dep = dep;  // stage 2: ready when its stage-1 batch ends, whatever the compute stream
    else
      b.ready = std::max(b.ready, s.clock);
    auto& st = s.streams[in.stream];
    st.queue.push_back(p);
    st.last = id;
    try_arrive(r, in.stream);
    return id;
  }

  void try_arrive(int r, std::uint8_t stream) {
    auto& st = ranks_[static_cast<std::size_t>(r)].streams[stream];
    if (st.head >= st.queue.size() || st.head_arrived) return;
    const Pending& h = st.queue[st.head];
    double t = st.free_at;
    if (h.dep >= 0) {
      Batch& d = batches_[static_cast<std::size_t>(h.dep)];
      if (d.end < 0) {
        d.dep_waiters.emplace_back(r, stream);
        return;
      }
      t = std::max(t, d.end);
    }
    st.head_arrived = true;
    Batch& b = batches_[static_cast<std::size_t>(h.batch)];
    ++b.arrived;
    b.ready = std::max(b.ready, t);
    if (b.arrived == b.members) events_.emplace(b.ready, h.batch);
  }

  // Ends the rank's step if its streams have drained; false when it must wait (or is done).
  bool finish_step(int r, RankState& s) {
    if (!s.paused) {
      close_segment(r, s);
      s.paused = true;
    }
    double end = s.clock;
    for (auto stream : {Stream::weights, Stream::reduce}) {
      const int last = s.streams[static_cast<std::size_t>(stream)].last;
      if (last < 0) continue;
      Batch& b = batches_[static_cast<std::size_t>(last)];
      if (b.end < 0) {
        b.compute_waiters.push_back(r);
        return false;
      }
      end = std::max(end, b.end);
    }
    s.phases[static_cast<std::size_t>(Phase::step)] = end - s.step_start;
    for (std::size_t p = 0; p < kPhaseCount; ++p)
      result_
          .rank_phases_ms[(static_cast<std::size_t>(s.step) * static_cast<std::size_t>(w_.world) +
                           static_cast<std::size_t>(r)) *
                              kPhaseCount +
                          p] = 1e3 * s.phases[p];
    if (++s.step == steps_) {
      s.done = true;
      return false;
    }
    // The engine starts every step from a world barrier (comm/timed_barrier.hpp): wait there
    // for the slowest rank's end of this step, then all start together.
    s.step_end = end;
    s.at_barrier = true;
    barrier_time_ = std::max(barrier_time_, end);
    if (++barrier_arrived_ < w_.world) return false;
    release_barrier(r);
    return true;
  }

  // Every rank starts its next step at the barrier's time; rank `last` (the last to arrive)
  // continues in its own advance(), the others are advanced here.
  void release_barrier(int last) {
    const double t = barrier_time_;
    barrier_arrived_ = 0;
    barrier_time_ = 0;
    for (auto& s : ranks_) {
      s.at_barrier = false;
      s.pc.restart();
      s.clock = s.step_start = t;
      s.phases = {};
      s.phases[static_cast<std::size_t>(Phase::step_sync)] = t - s.step_end;
      s.paused = false;
    }
    for (int q = 0; q < w_.world; ++q)
      if (q != last) advance(q);
  }

  void advance(int r) {
    RankState& s = ranks_[static_cast<std::size_t>(r)];
    if (s.done || s.at_barrier) return;
    for (;;) {
      if (s.blocking >= 0) {
        const Batch& b = batches_[static_cast<std::size_t>(s.blocking)];
        if (b.end < 0) {
          batches_[static_cast<std::size_t>(s.blocking)].compute_waiters.push_back(r);
          return;
        }
        trace_wait(r, s, b);
        s.clock = std::max(s.clock, b.end);
        s.blocking = -1;
      }
      if (s.pc.done()) {
        if (!finish_step(r, s)) return;
        continue;
      }
      const Instruction& in = *s.pc;
      if ((in.switches || in.kind == Instruction::switch_phase) && !s.switched) {
        close_segment(r, s);
        s.seg_phase = in.phase;
        s.seg_exposed = in.exposed;
        s.seg_start = s.clock;
        s.switched = true;
      }
      switch (in.kind) {
        case Instruction::compute:
          if (traced(r))
            trace_span(
                r, s, TraceTrack::compute,
                s.seg_phase < 0 ? "compute" : engine::phase_name(static_cast<Phase>(s.seg_phase)),
                s.clock, s.clock + in.seconds);
          s.clock += in.seconds;
          break;
        case Instruction::switch_phase: break;  // done above
        case Instruction::issue: {
          const int id = issue(r, s, in);
          // On a CPU the rank's own core moves the bytes (MPI progresses inside its calls):
          // communication does not overlap its compute.
          if (m_.device == DeviceKind::cpu) s.blocking = id;
          break;
        }
        case Instruction::wait: {
          const int b = batch_back(s, in.comm, in.back);
          if (b < 0) break;  // nothing to wait for (the previous step's of the first step)
          const Batch& batch = batches_[static_cast<std::size_t>(b)];
          if (batch.end < 0) {
            batches_[static_cast<std::size_t>(b)].compute_waiters.push_back(r);
            return;
          }
          trace_wait(r, s, batch);
          s.clock = std::max(s.clock, batch.end);
          break;
        }
      }
      s.pc.next();
      s.switched = false;
    }
  }

  void start_batch(int id, double t) {
    Batch& b = batches_[static_cast<std::size_t>(id)];
    b.start = t;
    const CommSpan span =
        spans_[static_cast<std::size_t>(b.comm)][static_cast<std::size_t>(b.index)];
    calls_.clear();
    for (const auto& c : b.spec->calls) calls_.push_back({c.kind, c.count, c.elem_bytes});
    const CollectiveTime ct = batch_time(m_, calls_, span);
    const Level level = span.domains > 1 ? Level::inter : Level::intra;
    const int flow = net_.start(t, b.comm, b.index, level, ct.latency_s, ct.transfer_s);
    if (static_cast<std::size_t>(flow) >= flow_batch_.size())
      flow_batch_.resize(static_cast<std::size_t>(flow) + 1, -1);
    flow_batch_[static_cast<std::size_t>(flow)] = id;
  }

  void end_batch(int id, double t) {
    batches_[static_cast<std::size_t>(id)].end = t;
    const int members = batches_[static_cast<std::size_t>(id)].members;
    const std::uint8_t stream = batches_[static_cast<std::size_t>(id)].stream;
    for (int i = 0; i < members; ++i) {
      const int r = member_rank(batches_[static_cast<std::size_t>(id)], i);
      if (traced(r)) trace_batch(r, i, batches_[static_cast<std::size_t>(id)]);
      auto& st = ranks_[static_cast<std::size_t>(r)].streams[stream];
      ++st.head;
      st.free_at = t;
      st.head_arrived = false;
      if (st.head == st.queue.size()) {
        st.queue.clear();
        st.head = 0;
      } else if (st.head >= 256 && 2 * st.head >= st.queue.size()) {
        // A stream that never drains within a step (communication-bound) would otherwise keep
        // every batch of the step queued: memory O(issues) per rank.
        st.queue.erase(st.queue.begin(), st.queue.begin() + static_cast<std::ptrdiff_t>(st.head));
        st.head = 0;
      }
      try_arrive(r, stream);
    }
    const auto waiters = std::move(batches_[static_cast<std::size_t>(id)].compute_waiters);
    const auto deps = std::move(batches_[static_cast<std::size_t>(id)].dep_waiters);
    for (int r : waiters) advance(r);
    for (const auto& [r, s] : deps) try_arrive(r, s);
  }

  // Batch b on member i (rank r)'s stream, with its collectives' bytes as the rank counts them.
  void trace_batch(int r, int i, const Batch& b) {
    TraceSpan span;
    span.rank = r;
    span.step = b.step;
    span.track = static_cast<TraceTrack>(static_cast<int>(TraceTrack::weights) + b.stream);
    span.name = fmt::format("{} g{}", engine::op_name(b.spec->op), b.spec->group);
    span.start_s = b.start;
    span.duration_s = b.end - b.start;
    span.group = b.spec->group;
    span.comm = comm_group_word(b.comm);
    span.calls = static_cast<int>(b.spec->calls.size());
    span.payload_bytes = span.counted_bytes = 0;
    for (const auto& c : b.spec->calls) {
      const auto count = static_cast<std::size_t>(c.count);
      span.payload_bytes += c.count * c.elem_bytes;
      span.counted_bytes +=
          comm::counted_bytes(c.kind, b.members, c.root == i, count, c.elem_bytes);
    }
    trace_->add(std::move(span));
  }

  [[noreturn]] void deadlock(int r) const {
    const RankState& s = ranks_[static_cast<std::size_t>(r)];
    std::string what = "its end of step";
    if (!s.pc.done() && (*s.pc).kind == Instruction::wait) {
      const int b = batch_back(s, (*s.pc).comm, (*s.pc).back);
      if (b >= 0) {
        const Batch& batch = batches_[static_cast<std::size_t>(b)];
        what =
            fmt::format("{} of group {} ({} of {} ranks arrived)", engine::op_name(batch.spec->op),
                        batch.spec->group, batch.arrived, batch.members);
      }
    }
    throw RuntimeFailure(
        fmt::format("projection deadlock: rank {} waits at step {} for {}", r, s.step + 1, what));
  }

  const WorldPrograms& w_;
  const Machine& m_;
  Trace* trace_;
  int steps_;
  RankGrid grid_;
  LinkNetwork net_;
  std::vector<RankState> ranks_;
  int barrier_arrived_ = 0;  // ranks at the step barrier
  double barrier_time_ = 0;  // the latest of their arrivals
  std::vector<Batch> batches_;
  std::vector<std::vector<int>> instances_[engine::kCommGroupCount];
  std::vector<CommSpan> spans_[engine::kCommGroupCount];  // per instance
  std::priority_queue<std::pair<double, int>, std::vector<std::pair<double, int>>, std::greater<>>
      events_;
  std::vector<int> flow_batch_;
  std::vector<CallSize> calls_;
  std::unordered_map<const BatchSpec*, Tally> tallies_;
  std::vector<std::int64_t> rank_calls_, rank_bytes_;  // of the last step: [rank · channels + ch]
  ReplayResult result_;
};

}  // namespace

ReplayResult replay(const WorldPrograms& w, const Machine& machine, int steps, Trace* trace) {
  if (steps < 1) throw InputError(fmt::format("replay of {} steps is invalid (>= 1)", steps));
  return Replayer(w, machine, steps, trace).run();
}

}  // namespace dmuon::project
