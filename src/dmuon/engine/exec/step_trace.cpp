#include "dmuon/engine/exec/step_trace.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

namespace dmuon::engine {

std::size_t WallTraceClock::mark_compute() {
  const double now =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  if (!started_) {
    origin_ = now;
    started_ = true;
  }
  if (free_.empty()) {
    times_.push_back(now - origin_);
    return times_.size() - 1;
  }
  const std::size_t m = free_.back();
  free_.pop_back();
  times_[m] = now - origin_;
  return m;
}

StepTrace::StepTrace(Trace& trace, TraceClock& clock, int rank)
    : trace_(trace), clock_(clock), rank_(rank), lane_busy_(kStreamCount) {}

void StepTrace::close(TraceTrack track, std::string name, std::size_t start, bool exposed) {
  TraceSpan span;
  span.rank = rank_;
  span.step = static_cast<int>(step_ - 1);
  span.track = track;
  span.name = std::move(name);
  span.exposed = exposed;
  pending_.push_back({std::move(span), start, clock_.mark_compute()});
}

void StepTrace::issued(const void* batch, std::size_t start, Stream s, TraceSpan fields,
                       bool pending) {
  fields.rank = rank_;
  fields.step = static_cast<int>(step_ - 1);
  fields.track =
      static_cast<TraceTrack>(static_cast<int>(TraceTrack::weights) + static_cast<int>(s));
  if (clock_.stream_ordered()) {
    // The stream runs this batch to its end before anything queued on it later.
    fields.lane = 0;
    pending_.push_back({std::move(fields), start, clock_.mark(s)});
    return;
  }
  auto& busy = lane_busy_[static_cast<std::size_t>(s)];
  std::size_t lane = 0;
  while (lane < busy.size() && busy[lane]) ++lane;  // the first lane with nothing open
  if (lane == busy.size()) busy.push_back(false);
  busy[lane] = true;
  fields.lane = static_cast<int>(lane);
  open_[batch] = {std::move(fields), start, s};
  if (!pending) completed(batch);
}

void StepTrace::completed(const void* batch) {
  const auto it = open_.find(batch);
  if (it == open_.end()) return;
  Open o = std::move(it->second);
  open_.erase(it);
  lane_busy_[static_cast<std::size_t>(o.stream)][static_cast<std::size_t>(o.span.lane)] = false;
  pending_.push_back({std::move(o.span), o.start, clock_.mark(o.stream)});
}

void StepTrace::flush(bool all) {
  // A span whose stamps cannot be read yet (a CUDA replicate broadcast still running after the
  // step's synchronisation) waits for a later flush.
  std::vector<Pending> later;
  for (auto& p : pending_) {
    if (!all && !(clock_.readable(p.start) && clock_.readable(p.end))) {
      later.push_back(std::move(p));
      continue;
    }
    p.span.start_s = clock_.seconds(p.start);
    p.span.duration_s = clock_.seconds(p.end) - p.span.start_s;
    clock_.release(p.start);
    clock_.release(p.end);
    trace_.add(std::move(p.span));
  }
  pending_ = std::move(later);
}

}  // namespace dmuon::engine
