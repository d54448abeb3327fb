#pragma once
// Byte accounting of a backend's own buffers over a run (docs/MEMORY.md "Measured"): the
// backend holds a region when an op first fills it and drops it after the op that last reads
// it, each under the memory model's term (MemoryTerm); the tracker keeps the live total, its
// peak, the phase the peak occurs in and every term at that moment. Persistent arenas are held
// from construction. Exact at the points the engine controls, unlike process RSS; what the
// model leaves out is kept apart (uncounted) and never enters the peak.

#include <array>
#include <cstdint>
#include <map>
#include <utility>

#include "dmuon/engine/step/phase.hpp"
#include "dmuon/engine/step/run_result.hpp"

namespace dmuon::engine {

class MemoryTracker {
 public:
  /// The phase that holds from now on (an op's Phase; Phase::step, an untimed op's, keeps the
  /// one in progress).
  void enter(Phase phase);
  /// `bytes` of `term` live under `key` (a group, a slot): holding a key twice holds it once.
  void hold(MemoryTerm term, std::int64_t key, std::int64_t bytes);
  /// Frees what `key` holds under `term` (nothing if it holds nothing).
  void drop(MemoryTerm term, std::int64_t key);
  /// Allocated for the counted terms, and allocated but left out of the model: reported
  /// beside the peak, never in it.
  void add_reserved(std::int64_t bytes) { reserved_ += bytes; }
  void add_uncounted(std::int64_t bytes) { uncounted_ += bytes; }

  /// This rank's figures (MeasuredMemory::rank is this rank's world rank).
  MeasuredMemory result(int rank) const;

 private:
  std::map<std::pair<int, std::int64_t>, std::int64_t> held_;
  std::array<std::int64_t, kMemoryTermCount> live_{};
  std::int64_t total_ = 0;
  std::int64_t peak_ = -1;
  std::array<std::int64_t, kMemoryTermCount> at_peak_{};
  Phase phase_ = Phase::forward_comm;
  Phase peak_phase_ = Phase::forward_comm;
  std::int64_t reserved_ = 0, uncounted_ = 0;
};

/// The memory model's phase (forward, backward, optimizer) of an executor phase.
const char* memory_phase_of(Phase phase);

}  // namespace dmuon::engine
