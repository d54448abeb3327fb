#include "dmuon/boundary/tp_shard.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dmuon/base/error.hpp"

namespace dmuon::boundary {

std::vector<int> select_tp_sharded(const model::ModuleTree& tree, const std::vector<int>& dedicated,
                                   const DedicationRule& shard_rule, const DedicationRule& row_rule,
                                   int tp) {
  if (tp < 1 || tp > kMaxTp)
    throw InputError(fmt::format("--tp {} is invalid (valid: 1..{})", tp, kMaxTp));
  std::vector<int> dim(tree.num_parameters(), -1);
  if (tp == 1) return dim;
  for (int pid : dedicated) {
    const auto& p = tree.parameter(pid);
    if (!shard_rule.matches(p)) continue;
    if (p.ndim() != 2)
      throw InputError(fmt::format(
          "TP-sharded parameter '{}' has shape [{}]: tensor parallelism shards 2-D matrices "
          "only (narrow --tp-shard '{}', e.g. with ndim=2)",
          p.name, fmt::join(p.shape, ", "), shard_rule.spec()));
    const int d = row_rule.matches(p) ? 1 : 0;
    if (p.shape[static_cast<std::size_t>(d)] % tp != 0)
      throw InputError(fmt::format(
          "TP-sharded parameter '{}' has shape [{}]: its {} dimension {} ({}) is not divisible "
          "by --tp {} (valid: a --tp dividing it, or a --tp-shard rule that excludes it)",
          p.name, fmt::join(p.shape, ", "), d == 1 ? "row-parallel" : "column-parallel", d,
          p.shape[static_cast<std::size_t>(d)], tp));
    dim[static_cast<std::size_t>(pid)] = d;
  }
  return dim;
}

std::vector<std::int64_t> tp_local_shape(const std::vector<std::int64_t>& shape, int dim, int tp) {
  auto local = shape;
  if (dim >= 0) local.at(static_cast<std::size_t>(dim)) /= tp;
  return local;
}

}  // namespace dmuon::boundary
