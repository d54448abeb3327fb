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

}  // namespace dmuon::engine
