#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <unordered_map>

#include "dmuon/base/checked_int.hpp"
#include "dmuon/model/layer_key.hpp"
#include "dmuon/partition/partition.hpp"

namespace dmuon::partition {

std::vector<Unit> build_units(const model::ModuleTree& tree, const std::vector<int>& dedicated,
                              const PartitionOptions& options) {
  // Buckets in first-seen order; "none" (no layer key) is a bucket of its own.
  struct Bucket {
    std::optional<std::string> key;
    std::vector<int> params;
  };
  std::vector<Bucket> buckets;
  std::unordered_map<std::string, std::size_t> index;  // "\x01" marks the none bucket
  const bool by_site = options.group_key == GroupKey::site;
  if (by_site && options.site_keys.size() != tree.num_parameters())
    throw std::logic_error("build_units: --group-key site needs every parameter's site key");
  for (int pid : dedicated) {
    std::optional<std::string> key =
        by_site ? std::optional<std::string>(options.site_keys[static_cast<std::size_t>(pid)])
                : model::layer_key(tree.parameter(pid).name);
    const std::string lookup = key ? *key : std::string("\x01");
    auto it = index.find(lookup);
    if (it == index.end()) {
      it = index.emplace(lookup, buckets.size()).first;
      buckets.push_back({key, {}});
    }
    buckets[it->second].params.push_back(pid);
  }

  std::vector<Unit> units;
  std::unordered_map<int, int> pos_of;
  for (std::size_t i = 0; i < dedicated.size(); ++i) pos_of[dedicated[i]] = static_cast<int>(i);
  for (const auto& b : buckets) {
    Unit packed;
    packed.key = b.key;
    for (int pid : b.params) {
      const auto& p = tree.parameter(pid);
      // Unclamped: a zero-size parameter is 0 in loads and packing (only the optimizer cost
      // model clamps, inside parameter_cost).
      const std::int64_t numel = p.numel();
      const std::int64_t cost = parameter_cost(options.cost_model, p.name, p.shape);
      const bool packable =
          !std::binary_search(options.never_pack.begin(), options.never_pack.end(), pid);
      if (options.pack && packable && numel < options.pack_threshold) {
        packed.members.push_back(pid);
        const auto overflow = [&] {
          return fmt::format(
              "packed partition unit of '{}': its size overflows 64 bits at "
              "parameter '{}'",
              b.key ? *b.key : std::string("none"), p.name);
        };
        packed.numel = checked_add(packed.numel, numel, overflow);
        packed.cost = checked_add(packed.cost, cost, overflow);
      } else {
        units.push_back({b.key, {pid}, numel, cost});
      }
    }
    if (!packed.members.empty()) units.push_back(std::move(packed));
  }
  std::stable_sort(units.begin(), units.end(), [&](const Unit& a, const Unit& b) {
    return pos_of[a.members.front()] < pos_of[b.members.front()];
  });
  return units;
}

}  // namespace dmuon::partition
