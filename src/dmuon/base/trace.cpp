#include "dmuon/base/trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "dmuon/base/atomic_file.hpp"
#include "dmuon/base/error.hpp"

namespace dmuon {

const char* trace_track_name(TraceTrack t) {
  switch (t) {
    case TraceTrack::phases: return "phases";
    case TraceTrack::compute: return "compute";
    case TraceTrack::weights: return "weights stream";
    case TraceTrack::reduce: return "reduce stream";
    case TraceTrack::replicate: return "replicate stream";
  }
  return "?";
}

Trace::Trace(std::vector<int> ranks, int world, std::string source)
    : is_traced_(static_cast<std::size_t>(std::max(world, 0))), source_(std::move(source)) {
  for (int r : ranks) {
    if (r < 0 || r >= world)
      throw InputError(fmt::format(
          "trace rank {} is not a rank of the {}-rank world (valid: 0..{})", r, world, world - 1));
    is_traced_[static_cast<std::size_t>(r)] = true;
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  ranks_ = std::move(ranks);
}

bool Trace::traced(int rank) const {
  return rank >= 0 && static_cast<std::size_t>(rank) < is_traced_.size() &&
         is_traced_[static_cast<std::size_t>(rank)];
}

void Trace::add(int rank, int step, TraceTrack track, std::string name, double start_s,
                double end_s, bool exposed) {
  TraceSpan s;
  s.rank = rank;
  s.step = step;
  s.track = track;
  s.name = std::move(name);
  s.start_s = start_s;
  s.duration_s = end_s - start_s;
  s.exposed = exposed;
  spans_.push_back(std::move(s));
}

std::string Trace::spans_json() const {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& s : spans_)
    a.push_back({s.rank, s.step, static_cast<int>(s.track), s.lane, s.name, s.start_s, s.duration_s,
                 s.group, s.calls, s.payload_bytes, s.counted_bytes, s.comm, s.exposed});
  return a.dump();
}

void Trace::add_spans_json(const std::string& text) {
  for (const auto& e : nlohmann::json::parse(text)) {
    TraceSpan s;
    s.rank = e.at(0);
    s.step = e.at(1);
    s.track = static_cast<TraceTrack>(e.at(2).get<int>());
    s.lane = e.at(3);
    s.name = e.at(4);
    s.start_s = e.at(5);
    s.duration_s = e.at(6);
    s.group = e.at(7);
    s.calls = e.at(8);
    s.payload_bytes = e.at(9);
    s.counted_bytes = e.at(10);
    s.comm = e.at(11);
    s.exposed = e.at(12);
    spans_.push_back(std::move(s));
  }
}

std::string Trace::json(const std::string& title) const {
  using nlohmann::json;
  json events = json::array();
  std::set<std::pair<int, int>> threads;  // (rank, tid) with spans, plus the base tracks
  for (int r : ranks_) {
    events.push_back({{"ph", "M"},
                      {"pid", r},
                      {"name", "process_name"},
                      {"args", {{"name", fmt::format("{} rank {} ({})", source_, r, title)}}}});
    events.push_back(
        {{"ph", "M"}, {"pid", r}, {"name", "process_sort_index"}, {"args", {{"sort_index", r}}}});
    for (int t = 0; t < kTraceTrackCount; ++t) threads.insert({r, t});
  }
  for (const auto& s : spans_)
    threads.insert({s.rank, static_cast<int>(s.track) + kTraceTrackCount * s.lane});
  for (const auto& [r, tid] : threads) {
    const char* track = trace_track_name(static_cast<TraceTrack>(tid % kTraceTrackCount));
    const int lane = tid / kTraceTrackCount;
    events.push_back(
        {{"ph", "M"},
         {"pid", r},
         {"tid", tid},
         {"name", "thread_name"},
         {"args",
          {{"name", lane == 0 ? std::string(track) : fmt::format("{} #{}", track, lane + 1)}}}});
  }
  for (const auto& s : spans_) {
    json args = {{"step", s.step + 1}};
    if (s.track == TraceTrack::phases) args["exposed"] = s.exposed;
    if (s.payload_bytes >= 0) {
      args["group"] = s.group;
      args["communicator"] = s.comm;
      args["collectives"] = s.calls;
      args["payload_bytes"] = s.payload_bytes;
      args["counted_bytes"] = s.counted_bytes;
    }
    events.push_back({{"ph", "X"},
                      {"pid", s.rank},
                      {"tid", static_cast<int>(s.track) + kTraceTrackCount * s.lane},
                      {"name", s.name},
                      {"ts", s.start_s * 1e6},
                      {"dur", s.duration_s * 1e6},
                      {"args", std::move(args)}});
  }
  return json{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}}.dump() + "\n";
}

void Trace::write(const std::string& path, const std::string& title) const {
  write_file_atomically(path, json(title), "trace file");
}

}  // namespace dmuon
