#include "dmuon/engine/step/accumulation.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "dmuon/base/error.hpp"
#include "dmuon/engine/step/engine_options.hpp"

namespace dmuon::engine {

int parse_accum(std::string_view text) {
  const std::string s(text);
  const auto bad = [&] {
    return InputError(fmt::format(
        "--accum '{}' is invalid (valid: an integer 1..{}, micro-batches per step)", s, kMaxAccum));
  };
  if (s.empty() || s.front() < '0' || s.front() > '9') throw bad();
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (end != s.c_str() + s.size() || errno == ERANGE || v < 1 || v > kMaxAccum) throw bad();
  return static_cast<int>(v);
}

SampleRange micro_sample_range(std::int64_t n, int micro, int accum, int rank, int ranks) {
  const std::int64_t lo = n * micro / accum, hi = n * (micro + 1) / accum, m = hi - lo;
  SampleRange r;
  r.n = n;
  r.begin = lo + m * rank / ranks;
  r.end = lo + m * (rank + 1) / ranks;
  return r;
}

std::int64_t accum_hooks_fired(std::int64_t fired, int accum) {
  return fired * accum;
}

std::int64_t accum_hooks_communicating(std::int64_t fired, std::int64_t communicating, int accum) {
  const std::int64_t post = fired / 4;
  return accum * (communicating - post) + post;
}

plan::CommVolume accumulated_volume(plan::CommVolume v, int accum) {
  for (auto& c : v.broadcast.calls_per_rank) c *= accum;
  for (auto& b : v.broadcast.bytes_per_rank) b *= accum;
  v.hooks_communicating = accum_hooks_communicating(v.hooks_fired, v.hooks_communicating, accum);
  v.hooks_fired = accum_hooks_fired(v.hooks_fired, accum);
  return v;
}

}  // namespace dmuon::engine
