#pragma once
// Finding ops in a unit's lists by name or kind, for the step-work tests.

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "dmuon/work/op.hpp"

namespace dmuon::work::test {

inline std::vector<std::string> names(const std::vector<Op>& ops) {
  std::vector<std::string> out;
  for (const auto& op : ops) out.emplace_back(op.name);
  return out;
}

/// The first op called `name`; throws (failing the test) when there is none.
inline const Op& first(const std::vector<Op>& ops, const std::string& name) {
  const auto it = std::find_if(ops.begin(), ops.end(), [&](const Op& o) { return o.name == name; });
  if (it == ops.end()) throw std::runtime_error("no op " + name);
  return *it;
}

inline std::vector<const Op*> of_kind(const std::vector<Op>& ops, OpKind kind) {
  std::vector<const Op*> out;
  for (const auto& op : ops)
    if (op.kind == kind) out.push_back(&op);
  return out;
}

}  // namespace dmuon::work::test
