#include "dmuon/work/ep_routing.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "dmuon/base/error.hpp"

namespace dmuon::work {

const char* ep_dispatcher_name(EpDispatcher d) {
  return d == EpDispatcher::deepep ? "deepep" : "all-to-all";
}

const char* expert_routing_name(ExpertRouting r) {
  return r == ExpertRouting::consecutive ? "consecutive" : "uniform";
}

double destination_ranks(std::int64_t experts, std::int64_t top_k, int ep, ExpertRouting routing) {
  if (experts < 1 || top_k < 1 || ep < 1 || experts % ep != 0)
    throw InputError(fmt::format(
        "{} experts, top-{} over {} EP ranks do not split (valid: experts and top-k >= 1, EP "
        "size dividing the experts)",
        experts, top_k, ep));
  if (ep == 1) return 1;
  const std::int64_t n = experts, k = std::min(top_k, experts), per_rank = experts / ep;
  if (routing == ExpertRouting::uniform) {
    // P(no expert on a given rank) = C(n − n/E, k) / C(n, k), as a product of k ratios.
    double none = 1;
    for (std::int64_t i = 0; i < k; ++i)
      none *=
          std::max<double>(0, static_cast<double>(n - per_rank - i)) / static_cast<double>(n - i);
    return static_cast<double>(ep) * (1 - none);
  }
  // (t·k) mod n repeats within n tokens: the mean over one period of n.
  std::vector<char> hit(static_cast<std::size_t>(ep));
  double sum = 0;
  for (std::int64_t t = 0; t < n; ++t) {
    std::fill(hit.begin(), hit.end(), 0);
    for (std::int64_t j = 0; j < k; ++j)
      hit[static_cast<std::size_t>((t * k + j) % n / per_rank)] = 1;
    sum += static_cast<double>(std::count(hit.begin(), hit.end(), 1));
  }
  return sum / static_cast<double>(n);
}

}  // namespace dmuon::work
