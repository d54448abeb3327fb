#include "dmuon/plan/comm_volume.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "dmuon/base/abbreviate.hpp"
#include "dmuon/base/checked_int.hpp"
#include "dmuon/base/error.hpp"

namespace dmuon::plan {

const char* grad_reduce_name(GradReduce g) {
  return g == GradReduce::per_param ? "per-param" : "packed";
}

GradReduce parse_grad_reduce(std::string_view s) {
  if (s == "per-param" || s == "per_param") return GradReduce::per_param;
  if (s == "packed") return GradReduce::packed;
  throw InputError(fmt::format("unknown gradient reduce mode '{}' (valid: per-param, packed)",
                               abbreviate_value(s)));
}

std::int64_t KindVolume::max_calls() const {
  return calls_per_rank.empty() ? 0
                                : *std::max_element(calls_per_rank.begin(), calls_per_rank.end());
}
std::int64_t KindVolume::max_bytes() const {
  return bytes_per_rank.empty() ? 0
                                : *std::max_element(bytes_per_rank.begin(), bytes_per_rank.end());
}

std::string CommVolume::overflow_message(const char* what, int rank) const {
  return fmt::format(
      "predicted {}{}volume of rank {} per step overflows 64 bits (limit: 2^63-1 bytes per rank "
      "per step; the largest dedicated parameter is '{}', {} bytes on the wire)",
      what, *what ? " " : "", rank, abbreviate_value(largest_name), largest_bytes);
}

std::int64_t CommVolume::total_bytes(int rank) const {
  std::int64_t t = 0;
  for (const KindVolume* k : {&broadcast, &reduce, &reduce_stage2, &replicate_broadcast})
    t = checked_add(t, k->bytes_per_rank.at(static_cast<std::size_t>(rank)),
                    [&] { return overflow_message("", rank); });
  return t;
}

std::int64_t CommVolume::max_bytes_per_rank() const {
  std::int64_t m = 0;
  for (int r = 0; r < world; ++r) m = std::max(m, total_bytes(r));
  return m;
}

}  // namespace dmuon::plan
