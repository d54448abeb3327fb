#pragma once
// A per-rank timeline of replayed steps as Chrome trace-event JSON (Perfetto, chrome://tracing,
// https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU).
//
// One process per traced rank ("projected rank R", pid R), one thread per track:
//   phases     the phase timer's segments (forward_comm, backward_compute, ...; args: exposed)
//   compute    the compute stream's work and its blocked waits ("wait <op> g<group>")
//   weights, reduce, replicate   the CUDA backend's communication streams: each batch from the
//              moment every member has joined to its end (args: op, group, communicator,
//              collectives, payload bytes, this rank's counted bytes)
// Spans on one track never overlap. Times are µs from the start of the first replayed step.
// Bounded by the ranks the caller chooses (dmuon_project --trace-ranks, default rank 0).

#include <cstdint>
#include <string>
#include <vector>

namespace dmuon::project {

enum class TraceTrack : std::uint8_t { phases, compute, weights, reduce, replicate };
inline constexpr int kTraceTrackCount = 5;
const char* trace_track_name(TraceTrack t);

struct TraceSpan {
  int rank = 0;
  int step = 0;
  TraceTrack track = TraceTrack::compute;
  std::string name;
  double start_s = 0, duration_s = 0;
  // Batches (weights, reduce, replicate tracks); -1 elsewhere.
  int group = -1;
  int calls = -1;
  std::int64_t payload_bytes = -1;  ///< Σ count · element size over the batch's collectives
  std::int64_t counted_bytes = -1;  ///< what this rank's collective counters count (METRICS.md)
  const char* comm = nullptr;       ///< row | column | world | TP group
  bool exposed = false;             ///< phases: the segment counts as exposed communication
};

class Trace {
 public:
  /// Ranks to trace (any order, duplicates ignored). InputError for a rank outside 0..world-1.
  Trace(std::vector<int> ranks, int world);
  bool traced(int rank) const;
  const std::vector<int>& ranks() const { return ranks_; }
  void add(TraceSpan span) { spans_.push_back(std::move(span)); }
  const std::vector<TraceSpan>& spans() const { return spans_; }
  /// The trace-event JSON; `title` names the run (shown as each process's label suffix).
  std::string json(const std::string& title) const;
  /// Writes json() atomically (temporary + rename). InputError when the file cannot be written.
  void write(const std::string& path, const std::string& title) const;

 private:
  std::vector<int> ranks_;        // sorted, unique
  std::vector<bool> is_traced_;   // per world rank
  std::vector<TraceSpan> spans_;  // in the order the replay closes them
};

}  // namespace dmuon::project
