#include "dmuon/project/op_totals.hpp"

#include <algorithm>
#include <map>
#include <utility>

#include "dmuon/engine/step/activation_work.hpp"

namespace dmuon::project {

std::vector<OpTotal> op_totals(const work::StepWork& work, const OpTime& time) {
  std::map<std::pair<std::string, bool>, OpTotal> by;
  for (const auto& unit : work.units)
    for (const auto* ops : {&unit.forward, &unit.recompute, &unit.backward})
      for (const auto& op : *ops) {
        if (work::is_collective(op.kind)) continue;
        const bool parameter = engine::is_parameter_gemm(op);
        OpTotal& t = by[{op.name, parameter}];
        t.name = op.name;
        t.parameter_gemm = parameter;
        t.seconds += time.seconds(op);
        t.bytes += op.bytes();
        t.flops += op.flops;
        t.kernels += op.kernels;
      }
  std::vector<OpTotal> out;
  out.reserve(by.size());
  for (auto& [key, t] : by) out.push_back(std::move(t));
  std::stable_sort(out.begin(), out.end(),
                   [](const OpTotal& a, const OpTotal& b) { return a.seconds > b.seconds; });
  return out;
}

}  // namespace dmuon::project
