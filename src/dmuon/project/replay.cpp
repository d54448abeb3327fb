#include "dmuon/project/replay.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <limits>
#include <queue>
#include <tuple>
#include <unordered_map>

#include "dmuon/base/error.hpp"
#include "dmuon/base/trace.hpp"
#include "dmuon/project/collective_cost.hpp"
#include "dmuon/project/compute_contention.hpp"
#include "dmuon/project/link_network.hpp"
#include "dmuon/project/program_store.hpp"

namespace dmuon::project {
namespace {

using engine::CommGroup;
using engine::kChannelCount;
using engine::kPhaseCount;
using engine::Phase;

constexpr double kInf = std::numeric_limits<double>::infinity();

constexpr int kMixed = -1;  // a class's members are in different instances of a communicator
constexpr std::uint32_t kProgramEnd = std::numeric_limits<std::uint32_t>::max();

struct Tally;

struct Batch {
  const BatchSpec* spec = nullptr;
  CommGroup comm = CommGroup::shard;
  int index = 0;  // row or column
  int members = 1;
  std::uint8_t stream = 0;
  int arrived = 0;  // ranks whose stream has reached it
  double ready = 0;
  double start = -1, end = -1;
  int step = 0;                  // of its first issuer
  const Tally* tally = nullptr;  // its calls and bytes per channel (every member's)
  // The classes those ranks were in (a class that splits: both), in arrival order: a list in
  // Replayer::arrivals_ (no allocation per batch).
  int arrivers_head = -1, arrivers_tail = -1;
  std::vector<int> compute_waiters;  // classes
  std::vector<std::pair<int, std::uint8_t>> dep_waiters;
  // StepRunModel::comm_issue_order: the batch issued just before it on its communicator
  // instance, which must end first, and the one issued just after it, waiting for its end.
  int comm_prev = -1, comm_next = -1;
  // Classes computing while it holds SMs (or may start to): woken at its end to re-rate their
  // compute (compute_contention.hpp). An entry is current while the class's `listening` names
  // this batch.
  std::vector<int> listeners;
};

// A batch issued on a class's stream, not yet begun there. Its issue time is folded into
// Batch::ready when issued (the batch starts at the latest of its members' issue times, stream
// frees and dependencies), so a queue entry is 8 bytes: a communication-bound step keeps a
// whole step's batches queued.
struct Pending {
  int batch;
  int dep;
  bool operator==(const Pending& o) const { return batch == o.batch && dep == o.dep; }
};

struct StreamState {
  std::vector<Pending> queue;
  std::size_t head = 0;
  double free_at = 0;
  bool head_arrived = false;
  int last = -1;  // the last batch issued on it (any step)
  bool operator==(const StreamState& o) const {
    return queue.size() - head == o.queue.size() - o.head &&
           std::equal(queue.begin() + static_cast<std::ptrdiff_t>(head), queue.end(),
                      o.queue.begin() + static_cast<std::ptrdiff_t>(o.head)) &&
           free_at == o.free_at && head_arrived == o.head_arrived && last == o.last;
  }
};

// What the ranks of a class share: their place in their programs and their state there. A
// member's own figures are its offset (Replayer::offsets_) plus the class's totals.
struct ClassState {
  const Instruction* at = nullptr;   // the next instruction; nullptr: the program has ended
  const Instruction* end = nullptr;  // the end of its chunk
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
  // A compute instruction run while collectives hold SMs (compute_contention.hpp): the fraction
  // of it left at `clock`, at the rate of `held` SMs held since then, and when it began.
  bool contending = false;
  double work_left = 0, compute_start = 0;
  int held = 0;
  std::uint32_t wake_gen = 0;  // its latest scheduled finish (Replayer::wakes_)
  // Per stream: the batch whose listeners list holds this class, or -1.
  std::array<int, kStreamCount> listening = no_listening();
  static constexpr std::array<int, kStreamCount> no_listening() {
    std::array<int, kStreamCount> a{};
    for (int& x : a) x = -1;
    return a;
  }
  std::array<double, kPhaseCount> phases{};
  std::array<StreamState, kStreamCount> streams;
  std::array<int, engine::kCommGroupCount> seq{};            // issues so far per communicator
  std::array<int, engine::kCommGroupCount> instance{};       // of each communicator, or kMixed
  std::array<std::int64_t, kChannelCount> calls{}, bytes{};  // of the last step, per member

  // The same future: merged classes advance as one.
  bool same_state(const ClassState& o) const {
    return at == o.at && end == o.end && step == o.step && clock == o.clock &&
           step_start == o.step_start && at_barrier == o.at_barrier && seg_phase == o.seg_phase &&
           seg_exposed == o.seg_exposed && paused == o.paused && done == o.done &&
           switched == o.switched && blocking == o.blocking && contending == o.contending &&
           work_left == o.work_left && held == o.held && seq == o.seq && streams == o.streams;
  }
};

// A rank class: ranks at the same instruction of the same chunk, with the same state.
struct RankClass : ClassState {
  std::vector<int> members;
  bool alive = true;
  bool traced = false;  // a traced rank alone: never merged
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
  Replayer(const WorldPrograms& w, const Machine& m, int steps, Trace* trace,
           ReplayGrouping grouping)
      : w_(w),
        m_(m),
        trace_(trace),
        steps_(steps),
        classes_enabled_(grouping == ReplayGrouping::rank_classes),
        grid_(w.grid),
        net_(grid_.instances(CommGroup::shard), grid_.instances(CommGroup::replicate),
             grid_.tp > 1 ? grid_.instances(CommGroup::tp) : 0,
             grid_.has_expert_groups() ? grid_.instances(CommGroup::expert) : 0) {
    const auto world = static_cast<std::size_t>(w.world);
    contention_ = reference_held_sms(m) > 0;
    sms_ = m.compute.sm_count;
    result_.steps = steps;
    result_.world = w.world;
    result_.rank_phases_ms.assign(static_cast<std::size_t>(steps) * world * kPhaseCount, 0.0);
    rank_calls_.assign(kChannelCount * world, 0);
    rank_bytes_.assign(kChannelCount * world, 0);
    offsets_.assign(kPhaseCount * world, 0.0);
    class_of_.assign(world, -1);
    chunk_at_.resize(world);
    chunk_end_.resize(world);
    // Instances per communicator: rows and columns of each DP group, the world, the TP groups.
    for (CommGroup comm : kAllCommGroups) {
      const auto c = static_cast<std::size_t>(comm);
      const bool none = (comm == CommGroup::tp && grid_.tp == 1) ||
                        (comm == CommGroup::expert && !grid_.has_expert_groups()) ||
                        comm == CommGroup::ep ||      // the tokens' all-to-alls are priced ops
                        comm == CommGroup::pipeline;  // stages compose (pipeline_schedule.hpp)
      const int count = none ? 0 : grid_.instances(comm);
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
    // The first classes: every traced rank alone, the others together (split below by their
    // first chunks).
    std::vector<int> untraced;
    for (int r = 0; r < w.world; ++r) {
      rewind(r);
      if (!classes_enabled_ || traced(r))
        make_class({r}, traced(r));
      else
        untraced.push_back(r);
    }
    if (!untraced.empty()) make_class(std::move(untraced), false);
  }

  ReplayResult run() {
    // The first classes part by their first chunks; then each runs until it blocks.
    for (int c = 0, n = static_cast<int>(classes_.size()); c < n; ++c) split_at_chunk_start(c);
    runnable_.clear();
    for (int c = 0, n = static_cast<int>(classes_.size()); c < n; ++c) advance(c);
    std::vector<int> finished;
    for (;;) {
      const double th = events_.empty() ? kInf : events_.top().first;
      const double tn = net_.next_event();
      const double tw = wakes_.empty() ? kInf : std::get<0>(wakes_.top());
      if (th == kInf && tn == kInf && tw == kInf) break;
      if (tw < std::min(th, tn)) {
        const auto [t, c, gen] = wakes_.top();
        wakes_.pop();
        wake(c, gen, t);
        continue;
      }
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
      if (!klass(r).done) deadlock(r);
    fill_in_flight();
    result_.batches = static_cast<std::int64_t>(batches_.size());
    result_.rank_classes = static_cast<std::int64_t>(classes_.size());
    result_.rank_class_max = max_alive_;
    // Rank-major while counting, channel-major in the result: a rank's own offset plus its
    // class's totals.
    const auto world = static_cast<std::size_t>(w_.world);
    result_.calls.assign(kChannelCount * world, 0);
    result_.bytes.assign(kChannelCount * world, 0);
    for (std::size_t r = 0; r < world; ++r) {
      const RankClass& k = klass(static_cast<int>(r));
      for (std::size_t ch = 0; ch < kChannelCount; ++ch) {
        result_.calls[ch * world + r] = rank_calls_[r * kChannelCount + ch] + k.calls[ch];
        result_.bytes[ch * world + r] = rank_bytes_[r * kChannelCount + ch] + k.bytes[ch];
      }
    }
    return std::move(result_);
  }

 private:
  // Per channel, as the engine's in-flight clock measures it (engine/exec/in_flight_clock.hpp)
  // but for the last step's batches: on each instance of the channel's communicator, the union
  // of its batches' spans and the message bytes of their calls; the max over instances (every
  // member of an instance sees its spans, so this is the max over ranks).
  void fill_in_flight() {
    struct Span {
      std::size_t channel;
      int instance;
      double start, end, bytes;
    };
    std::vector<Span> spans;
    for (const Batch& b : batches_) {
      if (b.step != steps_ - 1 || b.start < 0 || b.end < 0) continue;
      for (const auto& c : b.spec->calls) {
        const std::size_t ch = engine::channel_index(b.comm, c.kind);
        spans.push_back({ch, b.index, b.start, b.end,
                         comm::message_bytes(c.kind, c.count, c.elem_bytes, b.members)});
      }
    }
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
      return std::tie(a.channel, a.instance, a.start) < std::tie(b.channel, b.instance, b.start);
    });
    result_.in_flight_ms.fill(0.0);
    result_.message_bytes.fill(0.0);
    for (std::size_t i = 0; i < spans.size();) {
      const Span& first = spans[i];
      double busy = 0, bytes = 0, open = first.start, close = first.start;
      for (; i < spans.size() && spans[i].channel == first.channel &&
             spans[i].instance == first.instance;
           ++i) {
        const Span& s = spans[i];
        bytes += s.bytes;
        if (s.start > close) {  // a gap: the span before it is closed
          busy += close - open;
          open = s.start;
        }
        close = std::max(close, s.end);
      }
      busy += close - open;
      result_.in_flight_ms[first.channel] =
          std::max(result_.in_flight_ms[first.channel], busy * 1e3);
      result_.message_bytes[first.channel] = std::max(result_.message_bytes[first.channel], bytes);
    }
  }

  const RankClass& klass(int rank) const {
    return classes_[static_cast<std::size_t>(class_of_[static_cast<std::size_t>(rank)])];
  }
  RankClass& cls(int c) { return classes_[static_cast<std::size_t>(c)]; }
  double* offset(int rank) { return &offsets_[static_cast<std::size_t>(rank) * kPhaseCount]; }

  // Classes ---------------------------------------------------------------------------------

  int make_class(std::vector<int> members, bool is_traced) {
    const int id = static_cast<int>(classes_.size());
    classes_.emplace_back();
    RankClass& k = classes_.back();
    k.traced = is_traced;
    for (CommGroup comm : kAllCommGroups) {
      const auto c = static_cast<std::size_t>(comm);
      k.instance[c] = common_instance(members, comm);
    }
    for (int r : members) class_of_[static_cast<std::size_t>(r)] = id;
    k.members = std::move(members);
    note_alive(+1);
    return id;
  }

  int common_instance(const std::vector<int>& members, CommGroup comm) const {
    const int first = grid_.instance(members.front(), comm);
    for (int r : members)
      if (grid_.instance(r, comm) != first) return kMixed;
    return first;
  }

  void note_alive(int delta) {
    alive_ += delta;
    max_alive_ = std::max<std::int64_t>(max_alive_, alive_);
  }

  // A rank back at the start of its program.
  void rewind(int r) {
    const auto& chunks = w_.programs.chunks_of(w_.program_of_rank[static_cast<std::size_t>(r)]);
    chunk_at_[static_cast<std::size_t>(r)] = chunks.data();
    chunk_end_[static_cast<std::size_t>(r)] = chunks.data() + chunks.size();
  }

  std::uint32_t chunk_key(int r) const {
    const auto i = static_cast<std::size_t>(r);
    return chunk_at_[i] == chunk_end_[i] ? kProgramEnd : *chunk_at_[i];
  }

  void enter_chunk(RankClass& k) {
    const std::uint32_t c = chunk_key(k.members.front());
    if (c == kProgramEnd) {
      k.at = k.end = nullptr;
    } else {
      k.at = w_.programs.chunk_begin(c);
      k.end = w_.programs.chunk_end(c);
    }
  }

  // Splits class c by key(rank): the largest part stays c, each other part becomes a class of
  // the same state (registered wherever c waits for its streams) and is queued to advance.
  // Returns the new classes.
  template <class Key>
  std::vector<int> split(int c, Key key) {
    std::vector<int> made;
    auto& members = cls(c).members;
    if (members.size() < 2) return made;
    const auto first = key(members.front());
    std::size_t same = 1;
    while (same < members.size() && key(members[same]) == first) ++same;
    if (same == members.size()) return made;
    std::vector<std::pair<decltype(key(0)), std::vector<int>>> parts;
    std::unordered_map<decltype(key(0)), std::size_t> part_of;
    for (int r : members) {
      const auto k = key(r);
      auto it = part_of.find(k);
      if (it == part_of.end()) {
        it = part_of.emplace(k, parts.size()).first;
        parts.emplace_back(k, std::vector<int>());
      }
      parts[it->second].second.push_back(r);
    }
    std::size_t keep = 0;
    for (std::size_t i = 1; i < parts.size(); ++i)
      if (parts[i].second.size() > parts[keep].second.size()) keep = i;
    cls(c).members = std::move(parts[keep].second);
    const auto mixed = cls(c).instance;  // kMixed where the members were in several instances
    auto settle = [&](RankClass& k) {
      for (CommGroup comm : kAllCommGroups) {
        const auto g = static_cast<std::size_t>(comm);
        if (mixed[g] == kMixed) k.instance[g] = common_instance(k.members, comm);
      }
    };
    settle(cls(c));
    for (std::size_t i = 0; i < parts.size(); ++i) {
      if (i == keep) continue;
      const int id = static_cast<int>(classes_.size());
      classes_.push_back(copy_state(cls(c)));
      RankClass& k = classes_.back();
      k.members = std::move(parts[i].second);
      settle(k);
      for (int r : k.members) class_of_[static_cast<std::size_t>(r)] = id;
      register_like(c, id);
      note_alive(+1);
      made.push_back(id);
    }
    return made;
  }

  // A class with `from`'s state (its streams' queues from their heads on) and no members.
  static RankClass copy_state(const RankClass& from) {
    RankClass k;
    static_cast<ClassState&>(k) = from;
    k.listening = ClassState::no_listening();  // in no batch's listeners
    for (StreamState& st : k.streams) {
      st.queue.erase(st.queue.begin(), st.queue.begin() + static_cast<std::ptrdiff_t>(st.head));
      st.head = 0;
    }
    return k;
  }

  // A class split from `from` is registered where `from` is: at the batch its streams' heads
  // have reached, or the stage-1 batch a head waits for. (Splits happen while a class runs, so
  // it waits for nothing on its compute stream.)
  void register_like(int from, int to) {
    for (std::size_t s = 0; s < kStreamCount; ++s) {
      const StreamState& st = cls(from).streams[s];
      if (st.head >= st.queue.size()) continue;
      const Pending& h = st.queue[st.head];
      if (st.head_arrived) {
        add_arriver(h.batch, to);
      } else if (h.dep >= 0) {
        if (batches_[static_cast<std::size_t>(h.dep)].end < 0)
          batches_[static_cast<std::size_t>(h.dep)].dep_waiters.emplace_back(
              to, static_cast<std::uint8_t>(s));
        else  // its stage 1 has just ended (end_batch arrives `from` after its waiters run)
          try_arrive(to, static_cast<std::uint8_t>(s));
      }
    }
  }

  void add_arriver(int batch, int c) {
    int node = free_arrival_;
    if (node >= 0) {
      free_arrival_ = arrivals_[static_cast<std::size_t>(node)].next;
      arrivals_[static_cast<std::size_t>(node)] = {c, -1};
    } else {
      node = static_cast<int>(arrivals_.size());
      arrivals_.push_back({c, -1});
    }
    Batch& b = batches_[static_cast<std::size_t>(batch)];
    if (b.arrivers_tail >= 0)
      arrivals_[static_cast<std::size_t>(b.arrivers_tail)].next = node;
    else
      b.arrivers_head = node;
    b.arrivers_tail = node;
  }

  // The batch's arrivers in order (valid until the next take), their nodes freed.
  const std::vector<int>& take_arrivers(int batch) {
    Batch& b = batches_[static_cast<std::size_t>(batch)];
    taken_.clear();
    for (int node = b.arrivers_head; node >= 0;) {
      const int next = arrivals_[static_cast<std::size_t>(node)].next;
      taken_.push_back(arrivals_[static_cast<std::size_t>(node)].cls);
      arrivals_[static_cast<std::size_t>(node)].next = free_arrival_;
      free_arrival_ = node;
      node = next;
    }
    b.arrivers_head = b.arrivers_tail = -1;
    return taken_;
  }

  // Moves class `from`'s members into `into` (same_state): each member keeps its own totals as
  // an offset to `into`'s, including the part of the open phase segment it began earlier.
  void merge(int from, int into) {
    RankClass& f = cls(from);
    RankClass& t = cls(into);
    for (int r : f.members) {
      double* o = offset(r);
      for (std::size_t p = 0; p < kPhaseCount; ++p) o[p] += f.phases[p] - t.phases[p];
      if (f.seg_phase >= 0) {
        const double earlier = t.seg_start - f.seg_start;
        o[static_cast<std::size_t>(f.seg_phase)] += earlier;
        if (f.seg_exposed) o[static_cast<std::size_t>(Phase::exposed_comm)] += earlier;
      }
      const std::size_t at = static_cast<std::size_t>(r) * kChannelCount;
      for (std::size_t ch = 0; ch < kChannelCount; ++ch) {
        rank_calls_[at + ch] += f.calls[ch] - t.calls[ch];
        rank_bytes_[at + ch] += f.bytes[ch] - t.bytes[ch];
      }
      class_of_[static_cast<std::size_t>(r)] = into;
    }
    t.members.insert(t.members.end(), f.members.begin(), f.members.end());
    for (std::size_t g = 0; g < engine::kCommGroupCount; ++g)
      if (t.instance[g] != f.instance[g]) t.instance[g] = kMixed;
    f = RankClass();
    f.alive = false;
    note_alive(-1);
  }

  // Merges the classes of `ids` that have the same state (the first of each kind stays).
  void merge_equal(const std::vector<int>& ids) {
    if (!classes_enabled_ || ids.size() < 2) return;
    keyed_.clear();
    for (int c : ids) {
      const RankClass& k = cls(c);
      if (k.alive && !k.traced) keyed_.emplace_back(state_hash(k), c);
    }
    // Equal states hash alike; in a run of equal hashes the earlier classes stay.
    std::stable_sort(keyed_.begin(), keyed_.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    for (std::size_t i = 0; i < keyed_.size();) {
      std::size_t j = i + 1;
      while (j < keyed_.size() && keyed_[j].first == keyed_[i].first) ++j;
      for (std::size_t q = i + 1; q < j; ++q)
        for (std::size_t p = i; p < q; ++p) {
          const int into = keyed_[p].second, from = keyed_[q].second;
          if (cls(into).alive && cls(into).same_state(cls(from))) {
            merge(from, into);
            break;
          }
        }
      i = j;
    }
  }

  // A hash of what same_state compares first (classes in different instances of a
  // communicator differ in their streams' last batches).
  static std::uint64_t state_hash(const RankClass& k) {
    std::uint64_t h = 0;
    std::memcpy(&h, &k.clock, sizeof h);
    auto mix = [&h](std::uint64_t v) { h = (h ^ v) * 0x9e3779b97f4a7c15ULL; };
    mix(reinterpret_cast<std::uintptr_t>(k.at));
    mix(static_cast<std::uint64_t>(k.step));
    for (const auto& st : k.streams) mix(static_cast<std::uint64_t>(st.last + 1));
    return h;
  }

  // The class has run its chunk to the end: each member enters its next chunk, and members
  // whose next chunks differ part.
  void next_chunk(int c) {
    for (int r : cls(c).members) ++chunk_at_[static_cast<std::size_t>(r)];
    split_at_chunk_start(c);
  }

  void split_at_chunk_start(int c) {
    const auto made = split(c, [this](int r) { return chunk_key(r); });
    enter_chunk(cls(c));
    for (int k : made) {
      enter_chunk(cls(k));
      runnable_.push_back(k);
    }
  }

  // Members in different instances of `comm` part before they use it.
  void split_by_instance(int c, std::uint8_t comm) {
    if (cls(c).instance[comm] != kMixed) return;
    const auto g = static_cast<CommGroup>(comm);
    const auto made = split(c, [this, g](int r) { return grid_.instance(r, g); });
    for (int k : made) runnable_.push_back(k);
  }

  // -----------------------------------------------------------------------------------------

  bool traced(int r) const { return trace_ != nullptr && trace_->traced(r); }

  void trace_span(const RankClass& k, TraceTrack track, std::string name, double start, double end,
                  bool exposed = false) {
    trace_->add(k.members.front(), k.step, track, std::move(name), start, end, exposed);
  }

  // The compute stream waited for batch b from the clock until its end.
  void trace_wait(const RankClass& k, const Batch& b) {
    if (k.traced && b.end > k.clock)
      trace_span(k, TraceTrack::compute,
                 fmt::format("wait {} g{}", engine::op_name(b.spec->op), b.spec->group), k.clock,
                 b.end);
  }

  void close_segment(RankClass& k) {
    if (k.seg_phase < 0) return;
    const double d = k.clock - k.seg_start;
    if (k.traced)
      trace_span(k, TraceTrack::phases, engine::phase_name(static_cast<Phase>(k.seg_phase)),
                 k.seg_start, k.clock, k.seg_exposed);
    k.phases[static_cast<std::size_t>(k.seg_phase)] += d;
    if (k.seg_exposed) k.phases[static_cast<std::size_t>(Phase::exposed_comm)] += d;
    k.seg_phase = -1;
  }

  const Tally& tally_of(const BatchSpec* spec, int n) {
    auto it = tallies_.find(spec);
    if (it == tallies_.end()) it = tallies_.emplace(spec, tally(*spec, n)).first;
    return it->second;
  }

  // The batch issued `back` issues ago on `comm` by ranks with `seq` issues there in instance
  // `instance` (1 = the latest), or -1 (before the first step: a previous-step wait of step 1).
  int batch_back(int seq, int instance, std::uint8_t comm, int back) const {
    const int k = seq - back;
    if (back <= 0 || k < 0) return -1;
    return instances_[comm][static_cast<std::size_t>(instance)][static_cast<std::size_t>(k)];
  }
  int batch_back(const RankClass& k, std::uint8_t comm, int back) const {
    return batch_back(k.seq[comm], k.instance[comm], comm, back);
  }

  // Issues the batch for every member of class c; returns its id.
  int issue(int c, const Instruction& in) {
    RankClass& s = cls(c);
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
      if (w_.run_model.comm_issue_order && k > 0)
        b.comm_prev = list[static_cast<std::size_t>(k - 1)];
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
          s.members.front(), engine::op_name(spec->op), spec->group, comm_group_word(comm),
          engine::op_name(b.spec->op), b.spec->group, k));
    if (last_step) {
      for (const auto& t : b.tally->channels) {  // equal to the members' own (checked above)
        s.calls[t.channel] += t.calls;
        s.bytes[t.channel] += t.uniform;
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
    try_arrive(c, in.stream);
    return id;
  }

  int member_rank(const Batch& b, int member) const {
    return grid_.rank_of(b.comm, b.index, member);
  }

  void try_arrive(int c, std::uint8_t stream) {
    RankClass& k = cls(c);
    auto& st = k.streams[stream];
    if (st.head >= st.queue.size() || st.head_arrived) return;
    const Pending& h = st.queue[st.head];
    double t = st.free_at;
    if (h.dep >= 0) {
      Batch& d = batches_[static_cast<std::size_t>(h.dep)];
      if (d.end < 0) {
        d.dep_waiters.emplace_back(c, stream);
        return;
      }
      t = std::max(t, d.end);
    }
    st.head_arrived = true;
    Batch& b = batches_[static_cast<std::size_t>(h.batch)];
    b.arrived += static_cast<int>(k.members.size());
    add_arriver(h.batch, c);
    b.ready = std::max(b.ready, t);
    if (b.arrived == b.members) joined(h.batch);
  }

  // Every member has reached batch `id`: it starts at its ready time, once the batch issued
  // before it on its communicator has ended where a communicator runs in issue order.
  void joined(int id) {
    Batch& b = batches_[static_cast<std::size_t>(id)];
    if (b.comm_prev >= 0) {
      Batch& prev = batches_[static_cast<std::size_t>(b.comm_prev)];
      if (prev.end < 0) {
        prev.comm_next = id;
        return;
      }
      b.ready = std::max(b.ready, prev.end);
    }
    events_.emplace(b.ready, id);
  }

  // Ends the class's step if its streams have drained; false when it must wait (or is done,
  // or has been merged into another class at the barrier).
  bool finish_step(int c) {
    RankClass& s = cls(c);
    if (!s.paused) {
      close_segment(s);
      s.paused = true;
    }
    double end = s.clock;
    for (auto stream : {Stream::weights, Stream::reduce}) {
      const int last = s.streams[static_cast<std::size_t>(stream)].last;
      if (last < 0) continue;
      Batch& b = batches_[static_cast<std::size_t>(last)];
      if (b.end < 0) {
        b.compute_waiters.push_back(c);
        return false;
      }
      end = std::max(end, b.end);
    }
    s.phases[static_cast<std::size_t>(Phase::step)] = end - s.step_start;
    const auto world = static_cast<std::size_t>(w_.world);
    for (int r : s.members) {
      double* o = offset(r);
      double* out = &result_.rank_phases_ms[(static_cast<std::size_t>(s.step) * world +
                                             static_cast<std::size_t>(r)) *
                                            kPhaseCount];
      for (std::size_t p = 0; p < kPhaseCount; ++p) {
        out[p] = 1e3 * (static_cast<Phase>(p) == Phase::step ? s.phases[p] : o[p] + s.phases[p]);
        o[p] = 0;
      }
    }
    s.phases = {};
    if (++s.step == steps_) {
      s.done = true;
      return false;
    }
    if (!w_.run_model.barrier) {
      // No barrier (StepRunModel): the class starts its next step now, at its own end.
      s.clock = s.step_start = end;
      s.paused = false;
      for (int r : s.members) rewind(r);
      split_at_chunk_start(c);
      return true;
    }
    // The engine starts every step from a world barrier (comm/timed_barrier.hpp): wait there
    // for the slowest rank's end of this step, then all start together.
    s.step_end = end;
    s.at_barrier = true;
    barrier_time_ = std::max(barrier_time_, end);
    barrier_arrived_ += static_cast<int>(s.members.size());
    if (barrier_arrived_ < w_.world) return false;
    release_barrier(c);
    return cls(c).alive;
  }

  // Every rank starts its next step at the barrier's time, back at its program's start: the
  // classes part by their first chunks and merge where equal. Class `last` (the last to arrive)
  // continues in its own advance(), the others are advanced here.
  void release_barrier(int last) {
    const double t = barrier_time_;
    barrier_arrived_ = 0;
    barrier_time_ = 0;
    std::vector<int> released;
    for (int c = 0, n = static_cast<int>(classes_.size()); c < n; ++c) {
      RankClass& s = cls(c);
      if (!s.alive || !s.at_barrier) continue;
      s.at_barrier = false;
      s.clock = s.step_start = t;
      s.paused = false;
      for (int r : s.members) {
        rewind(r);
        offset(r)[static_cast<std::size_t>(Phase::step_sync)] = t - s.step_end;
      }
      released.push_back(c);
    }
    const std::size_t before = runnable_.size();
    for (std::size_t i = 0, n = released.size(); i < n; ++i) split_at_chunk_start(released[i]);
    released.insert(released.end(), runnable_.begin() + static_cast<std::ptrdiff_t>(before),
                    runnable_.end());
    runnable_.resize(before);
    merge_equal(released);
    for (int c : released)
      if (c != last) advance_class(c);
  }

  // Advances class c, then every class split off meanwhile.
  void advance(int c) {
    advance_class(c);
    while (!runnable_.empty()) {
      const int k = runnable_.back();
      runnable_.pop_back();
      advance_class(k);
    }
  }

  void advance_class(int c) {
    for (;;) {
      RankClass& s = cls(c);
      if (!s.alive || s.done || s.at_barrier) return;
      if (s.blocking >= 0) {
        const Batch& b = batches_[static_cast<std::size_t>(s.blocking)];
        if (b.end < 0) {
          batches_[static_cast<std::size_t>(s.blocking)].compute_waiters.push_back(c);
          return;
        }
        trace_wait(s, b);
        s.clock = std::max(s.clock, b.end);
        s.blocking = -1;
      }
      if (s.at == nullptr) {
        if (!finish_step(c)) return;
        continue;
      }
      const Instruction& in = *s.at;
      if ((in.switches || in.kind == Instruction::switch_phase) && !s.switched) {
        close_segment(s);
        s.seg_phase = in.phase;
        s.seg_exposed = in.exposed;
        s.seg_start = s.clock;
        s.switched = true;
      }
      switch (in.kind) {
        case Instruction::compute:
          // (Work that does not run on the SMs keeps its rate: no need to stop for it.)
          if (contention_ && in.sm_seconds > 0) {
            if (!compute_contended(c, in)) return;  // resumes when the SMs it gets change
            break;
          }
          if (s.traced) trace_compute(s, s.clock, s.clock + in.seconds);
          s.clock += in.seconds;
          break;
        case Instruction::switch_phase: break;  // done above
        case Instruction::issue: {
          split_by_instance(c, in.comm);
          if (in.dep_back > 0) split_by_instance(c, in.dep_comm);
          const int id = issue(c, in);
          // On a CPU the rank's own core moves the bytes (MPI progresses inside its calls):
          // communication does not overlap its compute.
          if (m_.device == DeviceKind::cpu) cls(c).blocking = id;
          break;
        }
        case Instruction::wait: {
          split_by_instance(c, in.comm);
          const int b = batch_back(s, in.comm, in.back);
          if (b < 0) break;  // nothing to wait for (the previous step's of the first step)
          const Batch& batch = batches_[static_cast<std::size_t>(b)];
          if (batch.end < 0) {
            batches_[static_cast<std::size_t>(b)].compute_waiters.push_back(c);
            return;
          }
          trace_wait(s, batch);
          s.clock = std::max(s.clock, batch.end);
          break;
        }
      }
      s.switched = false;
      if (++s.at == s.end) next_chunk(c);
    }
  }

  void trace_compute(const RankClass& k, double start, double end) {
    trace_span(k, TraceTrack::compute,
               k.seg_phase < 0 ? "compute" : engine::phase_name(static_cast<Phase>(k.seg_phase)),
               start, end);
  }

  // SMs batch b's collective kernel holds on each member while it runs: its link level's.
  int held_by(const Batch& b) const {
    const CommSpan& span =
        spans_[static_cast<std::size_t>(b.comm)][static_cast<std::size_t>(b.index)];
    return span.domains > 1 ? m_.inter.collective_sms : m_.intra.collective_sms;
  }

  // Runs class c's compute instruction `in` while its collectives hold SMs: at the rate of the
  // SMs held now, as long as nothing can change them. A stream's launched, unfinished batch
  // holds its SMs until its end; a stage-2 batch launches when its stage-1 batch ends. Where
  // such an end is still to come, the class stops here, listening to those batches, with a
  // wake-up at the instruction's end at the present rate; false then. True once it is done.
  bool compute_contended(int c, const Instruction& in) {
    RankClass& s = cls(c);
    if (!s.contending) {
      s.contending = true;
      s.work_left = 1;
      s.compute_start = s.clock;
    }
    if (s.work_left > 0) {
      int held = 0;
      bool may_change = false;
      for (std::size_t i = 0; i < kStreamCount; ++i) {
        const StreamState& st = s.streams[i];
        if (st.head >= st.queue.size()) continue;
        may_change = true;
        const Pending& h = st.queue[st.head];
        const int until = st.head_arrived ? h.batch : h.dep;  // not arrived: waits for its dep
        if (st.head_arrived) held += held_by(batches_[static_cast<std::size_t>(h.batch)]);
        if (s.listening[i] != until) {
          batches_[static_cast<std::size_t>(until)].listeners.push_back(c);
          s.listening[i] = until;
        }
      }
      const double d = contended_seconds(in.seconds, in.sm_seconds, sms_, held);
      if (may_change) {
        s.held = held;
        wakes_.emplace(s.clock + s.work_left * d, c, ++s.wake_gen);
        return false;
      }
      s.clock += s.work_left * d;
    }
    if (s.traced) trace_compute(s, s.compute_start, s.clock);
    s.contending = false;
    s.work_left = 0;
    s.held = 0;
    return true;
  }

  // Class k's contended compute up to time t (a batch it listens to ended).
  void progress(RankClass& k, double t) {
    if (t <= k.clock) return;
    const Instruction& in = *k.at;
    const double d = contended_seconds(in.seconds, in.sm_seconds, sms_, k.held);
    k.work_left = std::max(0.0, k.work_left - (t - k.clock) / d);
    k.clock = t;
  }

  // The wake-up scheduled when class c's contended instruction would end: it ended, if that
  // wake-up is still its latest.
  void wake(int c, std::uint32_t gen, double t) {
    RankClass& k = cls(c);
    if (!k.alive || !k.contending || k.wake_gen != gen) return;
    k.clock = t;
    k.work_left = 0;
    advance(c);
  }

  void start_batch(int id, double t) {
    Batch& b = batches_[static_cast<std::size_t>(id)];
    b.start = t;
    const CommSpan span =
        spans_[static_cast<std::size_t>(b.comm)][static_cast<std::size_t>(b.index)];
    calls_.clear();
    for (const auto& c : b.spec->calls) calls_.push_back({c.kind, c.count, c.elem_bytes});
    const CollectiveTime ct = batch_time(m_, calls_, span, w_.run_model.serial_rooted_calls);
    const Level level = span.domains > 1 ? Level::inter : Level::intra;
    const int flow = net_.start(t, b.comm, b.index, level, ct.latency_s, ct.transfer_s);
    if (static_cast<std::size_t>(flow) >= flow_batch_.size())
      flow_batch_.resize(static_cast<std::size_t>(flow) + 1, -1);
    flow_batch_[static_cast<std::size_t>(flow)] = id;
  }

  // Whether class k's compute stream waits for batch `id` right here (a wait instruction or a
  // CPU's blocking issue): after the batch ends its clock is at least the batch's end.
  bool waits_here(const RankClass& k, int id) const {
    if (k.blocking >= 0) return k.blocking == id;
    if (k.at == nullptr || k.at->kind != Instruction::wait) return false;
    return batch_back(k, k.at->comm, k.at->back) == id;
  }

  void end_batch(int id, double t) {
    batches_[static_cast<std::size_t>(id)].end = t;
    if (const int next = batches_[static_cast<std::size_t>(id)].comm_next; next >= 0) {
      Batch& n = batches_[static_cast<std::size_t>(next)];
      n.ready = std::max(n.ready, t);
      events_.emplace(n.ready, next);
    }
    const std::uint8_t stream = batches_[static_cast<std::size_t>(id)].stream;
    for (int c : take_arrivers(id)) {
      RankClass& k = cls(c);
      if (!k.alive) continue;
      if (k.traced) {
        const Batch& b = batches_[static_cast<std::size_t>(id)];
        const int r = k.members.front();
        trace_batch(r, grid_.member(r, b.comm), b);
      }
      auto& st = k.streams[stream];
      ++st.head;
      st.free_at = t;
      st.head_arrived = false;
      if (st.head == st.queue.size()) {
        st.queue.clear();
        st.head = 0;
      } else if (st.head >= 256 && 2 * st.head >= st.queue.size()) {
        // A stream that never drains within a step (communication-bound) would otherwise keep
        // every batch of the step queued: memory O(issues) per class.
        st.queue.erase(st.queue.begin(), st.queue.begin() + static_cast<std::ptrdiff_t>(st.head));
        st.head = 0;
      }
      try_arrive(c, stream);
    }
    auto waiters = std::move(batches_[static_cast<std::size_t>(id)].compute_waiters);
    const auto deps = std::move(batches_[static_cast<std::size_t>(id)].dep_waiters);
    if (waiters.size() > 1 && classes_enabled_) {
      // Classes waiting here continue from the batch's end at the latest: those whose state
      // is then equal advance as one.
      for (int c : waiters) {
        RankClass& k = cls(c);
        if (k.alive && !k.traced && waits_here(k, id)) k.clock = std::max(k.clock, t);
      }
      merge_equal(waiters);
    }
    for (int c : waiters) advance(c);
    for (const auto& [c, s] : deps)
      if (cls(c).alive) try_arrive(c, s);
    // After the stage-2 launches above: classes computing meanwhile continue at the new rate.
    const auto listeners = std::move(batches_[static_cast<std::size_t>(id)].listeners);
    for (int c : listeners) {
      RankClass& k = cls(c);
      bool current = false;
      for (int& l : k.listening)
        if (l == id) {
          l = -1;
          current = true;
        }
      if (!current || !k.alive || !k.contending) continue;
      progress(k, t);
      advance(c);
    }
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
    const RankClass& s = klass(r);
    std::string what = "its end of step";
    if (s.at != nullptr && s.at->kind == Instruction::wait) {
      const std::uint8_t comm = s.at->comm;
      const int b = batch_back(s.seq[comm], grid_.instance(r, static_cast<CommGroup>(comm)), comm,
                               s.at->back);
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
  bool classes_enabled_;
  RankGrid grid_;
  LinkNetwork net_;
  std::deque<RankClass> classes_;  // stable references; a merged class stays, emptied
  std::vector<int> runnable_;      // classes split off, not yet advanced
  struct Arrival {
    int cls, next;
  };
  std::vector<Arrival> arrivals_;  // the batches' arriver lists; free nodes chained
  int free_arrival_ = -1;
  std::vector<int> taken_;
  std::vector<std::pair<std::uint64_t, int>> keyed_;  // merge_equal's
  std::int64_t alive_ = 0, max_alive_ = 0;
  // Per rank: its class, its place in its program's chunk list, its own phase totals (offsets
  // to its class's), and (rank-major) its own counter offsets.
  std::vector<int> class_of_;
  std::vector<const std::uint32_t*> chunk_at_, chunk_end_;
  std::vector<double> offsets_;
  std::vector<std::int64_t> rank_calls_, rank_bytes_;  // [rank · channels + ch]
  int barrier_arrived_ = 0;                            // ranks at the step barrier
  double barrier_time_ = 0;                            // the latest of their arrivals
  std::vector<Batch> batches_;
  std::vector<std::vector<int>> instances_[engine::kCommGroupCount];
  std::vector<CommSpan> spans_[engine::kCommGroupCount];  // per instance
  std::priority_queue<std::pair<double, int>, std::vector<std::pair<double, int>>, std::greater<>>
      events_;
  // Contended compute (compute_contention.hpp): on a GPU machine whose collectives hold SMs.
  bool contention_ = false;
  int sms_ = 0;
  using Wake = std::tuple<double, int, std::uint32_t>;  // time, class, its wake_gen
  std::priority_queue<Wake, std::vector<Wake>, std::greater<>> wakes_;
  std::vector<int> flow_batch_;
  std::vector<CallSize> calls_;
  std::unordered_map<const BatchSpec*, Tally> tallies_;
  ReplayResult result_;
};

}  // namespace

ReplayResult replay(const WorldPrograms& w, const Machine& machine, int steps, Trace* trace,
                    ReplayGrouping grouping) {
  if (steps < 1) throw InputError(fmt::format("replay of {} steps is invalid (>= 1)", steps));
  return Replayer(w, machine, steps, trace, grouping).run();
}

}  // namespace dmuon::project
