#include "dmuon/work/unit_builder.hpp"

#include "dmuon/work/gemm_ops.hpp"

namespace dmuon::work::detail {
namespace {

// The attribute name under which `module` holds parameter `param`.
const std::string* attr_of(const model::ModuleTree& tree, int module, int param) {
  for (const auto& h : tree.parameter(param).holders)
    if (h.module == module) return &h.attr;
  return nullptr;
}

}  // namespace

std::optional<Linear> linear_of(const model::ModuleTree& tree, int module) {
  Linear l;
  for (int p : tree.module(module).params) {
    const auto* attr = attr_of(tree, module, p);
    const auto& param = tree.parameter(p);
    if (attr && *attr == "weight" && param.ndim() == 2) {
      l.module = module;
      l.param = p;
      l.out = param.shape[0];
      l.in = param.shape[1];
    } else if (attr && *attr == "bias" && param.ndim() == 1) {
      l.bias = true;
    }
  }
  if (l.param < 0) return std::nullopt;
  return l;
}

std::vector<int> subtree(const model::ModuleTree& tree, int module) {
  std::vector<int> out, stack{module};
  while (!stack.empty()) {
    const int m = stack.back();
    stack.pop_back();
    out.push_back(m);
    const auto& children = tree.module(m).children;
    for (auto it = children.rbegin(); it != children.rend(); ++it) stack.push_back(*it);
  }
  return out;
}

std::optional<model::NormKind> norm_of(const model::ModuleTree& tree, int module) {
  const auto& m = tree.module(module);
  if (m.type.find("Norm") == std::string::npos) return std::nullopt;
  for (int p : m.params)
    if (tree.parameter(p).ndim() == 1)
      return m.type.find("LayerNorm") != std::string::npos &&
                     m.type.find("RMS") == std::string::npos
                 ? model::NormKind::layer
                 : model::NormKind::rms;
  return std::nullopt;
}

void UnitBuilder::add(OpPair p, int module) {
  for (auto* list : {&p.forward, &p.backward})
    for (auto& op : *list)
      if (op.module < 0) op.module = module;
  forward_.insert(forward_.end(), p.forward.begin(), p.forward.end());
  backward_.push_back(std::move(p.backward));
}

void UnitBuilder::linear(const Linear& l, double tokens, double e, bool input_kept) {
  OpPair p = linear_ops(tokens, l.in, l.out, 1, l.bias, e);
  if (input_kept) p.forward.front().saved_bytes = 0;
  for (auto* list : {&p.forward, &p.backward})
    for (auto& op : *list) op.param = op.kind == OpKind::gemm ? l.param : -1;
  add(std::move(p), l.module);
}

void UnitBuilder::grouped_linear(const Linear& first, int container, int member,
                                 std::int64_t experts, double tokens_per_expert, double e,
                                 bool input_kept) {
  OpPair p = linear_ops(tokens_per_expert, first.in, first.out, experts, first.bias, e);
  if (input_kept) p.forward.front().saved_bytes = 0;
  for (auto* list : {&p.forward, &p.backward})
    for (auto& op : *list) op.member = member;
  add(std::move(p), container);
}

void UnitBuilder::finish(WorkUnit& unit) {
  unit.forward = std::move(forward_);
  unit.backward.clear();
  for (auto it = backward_.rbegin(); it != backward_.rend(); ++it)
    unit.backward.insert(unit.backward.end(), it->begin(), it->end());
  forward_.clear();
  backward_.clear();
}

}  // namespace dmuon::work::detail
