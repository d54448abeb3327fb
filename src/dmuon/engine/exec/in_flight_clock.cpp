#include "dmuon/engine/exec/in_flight_clock.hpp"

#include <algorithm>

namespace dmuon::engine {

double union_length(std::vector<std::pair<double, double>>& intervals) {
  std::sort(intervals.begin(), intervals.end());
  double total = 0;
  double cover_begin = 0, cover_end = 0;
  bool any = false;
  for (const auto& [b, e] : intervals) {
    if (e <= b) continue;
    if (!any || b > cover_end) {
      if (any) total += cover_end - cover_begin;
      cover_begin = b;
      cover_end = e;
      any = true;
    } else {
      cover_end = std::max(cover_end, e);
    }
  }
  if (any) total += cover_end - cover_begin;
  return total;
}

double InFlightClock::now_ms() const {
  return std::chrono::duration<double, std::milli>(Clock::now() - origin_).count();
}

void InFlightClock::start_step() {
  origin_ = Clock::now();
  for (auto& b : open_) b.since_ms = 0;
  for (auto& v : intervals_) v.clear();
}

void InFlightClock::open(const void* key, std::uint64_t channel_mask) {
  close(key);
  if (channel_mask != 0) open_.push_back({key, channel_mask, now_ms()});
}

void InFlightClock::close(const void* key) {
  const auto it =
      std::find_if(open_.begin(), open_.end(), [&](const OpenBatch& b) { return b.key == key; });
  if (it == open_.end()) return;
  const double end = now_ms();
  for (std::size_t c = 0; c < kChannelCount; ++c)
    if (it->mask & (std::uint64_t{1} << c)) intervals_[c].emplace_back(it->since_ms, end);
  open_.erase(it);
}

std::array<double, kChannelCount> InFlightClock::finish_step() {
  const double end = now_ms();
  for (const auto& b : open_)
    for (std::size_t c = 0; c < kChannelCount; ++c)
      if (b.mask & (std::uint64_t{1} << c)) intervals_[c].emplace_back(b.since_ms, end);
  std::array<double, kChannelCount> out{};
  for (std::size_t c = 0; c < kChannelCount; ++c) out[c] = union_length(intervals_[c]);
  return out;
}

}  // namespace dmuon::engine
