#include "dmuon/engine/exec/memory_tracker.hpp"

#include <stdexcept>

namespace dmuon::engine {

void MemoryTracker::enter(Phase phase) {
  if (phase != Phase::step) phase_ = phase;
}

void MemoryTracker::hold(MemoryTerm term, std::int64_t key, std::int64_t bytes) {
  if (bytes < 0) throw std::logic_error("memory tracker: negative bytes");
  const auto [it, fresh] = held_.emplace(std::pair{static_cast<int>(term), key}, bytes);
  if (!fresh) return;
  live_[static_cast<std::size_t>(term)] += bytes;
  total_ += bytes;
  // The first of equal peaks: the earliest moment (and phase) it is reached.
  if (total_ > peak_) {
    peak_ = total_;
    at_peak_ = live_;
    peak_phase_ = phase_;
  }
}

void MemoryTracker::drop(MemoryTerm term, std::int64_t key) {
  const auto it = held_.find({static_cast<int>(term), key});
  if (it == held_.end()) return;
  live_[static_cast<std::size_t>(term)] -= it->second;
  total_ -= it->second;
  held_.erase(it);
}

MeasuredMemory MemoryTracker::result(int rank) const {
  MeasuredMemory m;
  m.measured = true;
  m.peak_bytes = peak_ < 0 ? 0 : peak_;
  m.rank = rank;
  m.phase = memory_phase_of(peak_phase_);
  m.terms_at_peak = at_peak_;
  m.reserved_bytes = reserved_;
  m.uncounted_bytes = uncounted_;
  return m;
}

const char* memory_phase_of(Phase phase) {
  switch (phase) {
    case Phase::forward_comm:
    case Phase::forward_compute: return "forward";
    case Phase::backward_compute:
    case Phase::backward_comm: return "backward";
    case Phase::optimizer_ns:
    case Phase::optimizer_other: return "optimizer";
    default: return "step";
  }
}

}  // namespace dmuon::engine
