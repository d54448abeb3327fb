#include "dmuon/engine/activation_work.hpp"

namespace dmuon::engine {

bool is_parameter_gemm(const work::Op& op) {
  return op.kind == work::OpKind::gemm && (op.param >= 0 || op.member >= 0);
}

namespace {

std::vector<work::Op> without_parameter_gemms(const std::vector<work::Op>& ops) {
  std::vector<work::Op> out;
  for (const auto& op : ops)
    if (!is_parameter_gemm(op)) out.push_back(op);
  return out;
}

}  // namespace

std::shared_ptr<const ActivationWork> activation_work(const work::StepWork& work) {
  auto out = std::make_shared<ActivationWork>();
  if (!work.has_geometry) out->note = work.note;
  for (const auto& u : work.units) {
    ActivationUnit a;
    a.forward = without_parameter_gemms(u.forward);
    a.recompute = u.recompute;  // recomputed linears run again: work beyond the parameters'
    a.backward = without_parameter_gemms(u.backward);
    a.module = u.module;
    a.head = u.kind == "head";
    if (a.forward.empty() && a.recompute.empty() && a.backward.empty()) continue;
    out->units.push_back(std::move(a));
  }
  return out;
}

}  // namespace dmuon::engine
