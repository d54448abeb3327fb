#pragma once
// A per-rank timeline of steps as Chrome trace-event JSON (Perfetto, chrome://tracing): the
// projection's replayed steps (dmuon_project --trace) and the host engine's measured ones
// (dmuon_bench --trace) in one format, so the two load side by side.
//
// One process per traced rank ("<source> rank R (<title>)", pid R), one thread per track:
//   phases     the phase timer's segments (forward_comm, backward_compute, ...; args: exposed)
//   compute    the compute stream's work and its blocked waits ("wait <op> g<group>")
//   weights, reduce, replicate   the communication streams: each batch (args: op, group,
//              communicator, collectives, payload bytes, this rank's counted bytes)
// Spans on one (track, lane) never overlap: a measured stream whose batches overlap in time
// (MPI requests in flight together) spreads them over lanes ("reduce stream #2").
// Times are µs from the start of the first recorded step.

#include <cstdint>
#include <string>
#include <vector>

namespace dmuon {

enum class TraceTrack : std::uint8_t { phases, compute, weights, reduce, replicate };
inline constexpr int kTraceTrackCount = 5;
const char* trace_track_name(TraceTrack t);

struct TraceSpan {
  int rank = 0;
  int step = 0;  ///< 0-based
  TraceTrack track = TraceTrack::compute;
  int lane = 0;
  std::string name;
  double start_s = 0, duration_s = 0;
  // Batches (weights, reduce, replicate tracks); -1 elsewhere.
  int group = -1;
  int calls = -1;
  std::int64_t payload_bytes = -1;  ///< Σ count · element size over the batch's collectives
  std::int64_t counted_bytes = -1;  ///< what this rank's collective counters count (METRICS.md)
  std::string comm;                 ///< row | column | world | TP group
  bool exposed = false;             ///< phases: the segment counts as exposed communication
};

class Trace {
 public:
  /// Ranks to trace (any order, duplicates ignored) of a `world`; `source` names the side
  /// ("projected", "measured"). InputError for a rank outside 0..world-1.
  Trace(std::vector<int> ranks, int world, std::string source);
  bool traced(int rank) const;
  const std::vector<int>& ranks() const { return ranks_; }
  void add(TraceSpan span) { spans_.push_back(std::move(span)); }
  /// A span without batch fields (phases, compute, waits) from `start_s` to `end_s`.
  void add(int rank, int step, TraceTrack track, std::string name, double start_s, double end_s,
           bool exposed = false);
  const std::vector<TraceSpan>& spans() const { return spans_; }
  /// The spans alone as JSON (to move them between ranks) and back.
  std::string spans_json() const;
  void add_spans_json(const std::string& text);
  /// The trace-event JSON; `title` names the run (each process's label suffix).
  std::string json(const std::string& title) const;
  /// Writes json() atomically (temporary + rename). InputError when the file cannot be written.
  void write(const std::string& path, const std::string& title) const;

 private:
  std::vector<int> ranks_;       // sorted, unique
  std::vector<bool> is_traced_;  // per world rank
  std::string source_;
  std::vector<TraceSpan> spans_;  // in the order they were closed
};

}  // namespace dmuon
