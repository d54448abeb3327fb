#include "dmuon/project/trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "dmuon/base/atomic_file.hpp"
#include "dmuon/base/error.hpp"

namespace dmuon::project {

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

Trace::Trace(std::vector<int> ranks, int world) : is_traced_(static_cast<std::size_t>(world)) {
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
  return is_traced_[static_cast<std::size_t>(rank)];
}

std::string Trace::json(const std::string& title) const {
  using nlohmann::json;
  json events = json::array();
  for (int r : ranks_) {
    events.push_back({{"ph", "M"},
                      {"pid", r},
                      {"name", "process_name"},
                      {"args", {{"name", fmt::format("projected rank {} ({})", r, title)}}}});
    events.push_back(
        {{"ph", "M"}, {"pid", r}, {"name", "process_sort_index"}, {"args", {{"sort_index", r}}}});
    for (int t = 0; t < kTraceTrackCount; ++t)
      events.push_back({{"ph", "M"},
                        {"pid", r},
                        {"tid", t},
                        {"name", "thread_name"},
                        {"args", {{"name", trace_track_name(static_cast<TraceTrack>(t))}}}});
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
                      {"tid", static_cast<int>(s.track)},
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

}  // namespace dmuon::project
