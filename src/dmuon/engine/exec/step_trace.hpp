#pragma once
// dmuon_bench --trace on any backend. The executor tells a StepTrace where phase segments,
// compute ops, blocked waits and batches start and end; the StepTrace stamps each point with
// the backend's TraceClock and turns the stamps into spans once the clock can read them.
//
//   host (WallTraceClock)  wall time, readable at once; a batch ends when this rank observes
//                          its completion, and MPI requests of one stream may overlap (lanes)
//   CUDA (events)          events recorded in stream order, readable after the step's
//                          synchronisation; a batch ends in its stream's order right after its
//                          collectives (a stream runs its batches one after another: one lane),
//                          so the trace shows when the GPU ran the work, not when it was queued

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "dmuon/base/trace.hpp"
#include "dmuon/engine/step/step_op.hpp"

namespace dmuon::engine {

class TraceClock {
 public:
  virtual ~TraceClock() = default;
  /// A stamp after everything queued so far on the compute queue.
  virtual std::size_t mark_compute() = 0;
  /// A stamp after everything queued so far on communication stream `s`.
  virtual std::size_t mark(Stream s) = 0;
  /// Whether mark `m` can be read now.
  virtual bool readable(std::size_t m) = 0;
  /// Seconds from the clock's first mark to mark `m` (readable).
  virtual double seconds(std::size_t m) = 0;
  /// Mark `m` is read and no longer needed (its slot may be reused).
  virtual void release(std::size_t m) = 0;
  /// Batches end in their stream's order, marked right after they are issued (see above);
  /// false: they end when this rank observes their completion.
  virtual bool stream_ordered() const = 0;
};

/// The host's clock: steady-clock time at the call, readable at once.
class WallTraceClock final : public TraceClock {
 public:
  std::size_t mark_compute() override;
  std::size_t mark(Stream) override { return mark_compute(); }
  bool readable(std::size_t) override { return true; }
  double seconds(std::size_t m) override { return times_.at(m); }
  void release(std::size_t m) override { free_.push_back(m); }
  bool stream_ordered() const override { return false; }

 private:
  std::vector<double> times_;
  std::vector<std::size_t> free_;
  bool started_ = false;
  double origin_ = 0;
};

class StepTrace {
 public:
  /// Spans of world rank `rank` go into `trace`; `clock` outlives this.
  StepTrace(Trace& trace, TraceClock& clock, int rank);

  /// Steps are numbered as the executor's (1-based); spans carry step - 1.
  void begin_step(long step) { step_ = step; }
  /// A stamp on the compute queue, to start a span.
  std::size_t mark_compute() { return clock_.mark_compute(); }
  /// A stamp on stream `s` before a batch's collectives are queued.
  std::size_t mark(Stream s) { return clock_.mark(s); }
  /// A phase, compute or wait span from `start` to now on the compute queue.
  void close(TraceTrack track, std::string name, std::size_t start, bool exposed = false);
  /// Batch `batch` was just issued on stream `s` (its collectives queued after `start`);
  /// `fields` carries its name and batch fields. `pending`: it is still in flight.
  void issued(const void* batch, std::size_t start, Stream s, TraceSpan fields, bool pending);
  /// This rank saw `batch` complete (no-op for a batch not open, and on a stream-ordered clock).
  void completed(const void* batch);
  /// Adds the spans whose stamps are readable; `all`: at the end of the run, every one.
  void flush(bool all);

 private:
  struct Pending {
    TraceSpan span;
    std::size_t start, end;
  };
  struct Open {
    TraceSpan span;
    std::size_t start;
    Stream stream;
  };
  Trace& trace_;
  TraceClock& clock_;
  int rank_;
  long step_ = 0;
  std::vector<Pending> pending_;
  std::unordered_map<const void*, Open> open_;  // host: batches not yet seen complete
  std::vector<std::vector<bool>> lane_busy_;    // per stream: lanes with an open batch
};

}  // namespace dmuon::engine
