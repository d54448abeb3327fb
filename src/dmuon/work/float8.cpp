#include "dmuon/work/float8.hpp"

#include <map>
#include <string_view>
#include <utility>

namespace dmuon::work {
namespace {

Op scaling_op(const char* name, Phase phase, double read, double written) {
  Op op = memory_op(name, read, written, 0, 1);
  op.phase = phase;
  return op;
}

// A float8 Linear's GEMM: one of a parameter's (not a grouped expert GEMM), not `excluded`.
bool converted(const Op& op, int excluded) {
  return op.kind == OpKind::gemm && op.param >= 0 && op.member < 0 && op.module != excluded;
}

}  // namespace

OpPair float8_scaling_ops(double tokens, std::int64_t in_features, std::int64_t out_features,
                          double e) {
  const double x = tokens * static_cast<double>(in_features);  // input elements
  const double w = static_cast<double>(out_features) * static_cast<double>(in_features);
  const double dy = tokens * static_cast<double>(out_features);  // grad output elements
  constexpr double f8 = 1;
  OpPair p;
  p.forward = {scaling_op(kFloat8Amax, Phase::forward, x * e, 0),
               scaling_op("float8.cast", Phase::forward, x * e, x * f8),
               scaling_op(kFloat8Amax, Phase::forward, w * e, 0),
               scaling_op("float8.cast", Phase::forward, w * e, w * f8)};
  p.backward = {scaling_op(kFloat8Amax, Phase::backward, dy * e, 0),
                scaling_op("float8.cast", Phase::backward, dy * e, dy * f8),
                scaling_op("float8.transpose", Phase::backward, w * f8, w * f8),
                scaling_op("float8.transpose", Phase::backward, dy * f8, dy * f8),
                scaling_op("float8.transpose", Phase::backward, x * f8, x * f8)};
  return p;
}

void apply_float8(std::vector<Op>& forward, std::vector<Op>& backward, int excluded, double e) {
  // The forward GEMM of a Linear carries its shape: T × out, k = in.
  std::map<std::pair<int, int>, OpPair> scaling;  // (module, param) -> its scaling ops
  std::vector<Op> fwd;
  for (Op op : forward) {
    if (converted(op, excluded)) {
      OpPair s = float8_scaling_ops(op.gemm.m, static_cast<std::int64_t>(op.gemm.k),
                                    static_cast<std::int64_t>(op.gemm.n), e);
      for (auto* list : {&s.forward, &s.backward})
        for (auto& sop : *list) sop.module = op.module;
      fwd.insert(fwd.end(), s.forward.begin(), s.forward.end());
      op.float8 = true;
      scaling[{op.module, op.param}] = std::move(s);
    }
    fwd.push_back(op);
  }
  forward = std::move(fwd);
  std::vector<Op> bwd;
  for (Op op : backward) {
    const auto it = converted(op, excluded) ? scaling.find({op.module, op.param}) : scaling.end();
    if (it != scaling.end()) {
      const auto& s = it->second.backward;
      // Before dgrad: the grad output's amax and cast, the weight's transpose; before wgrad:
      // the grad output's and the input's transposes.
      const bool dgrad = std::string_view(op.name) == "linear.dgrad";
      if (dgrad)
        bwd.insert(bwd.end(), s.begin(), s.begin() + 3);
      else
        bwd.insert(bwd.end(), s.begin() + 3, s.end());
      op.float8 = true;
    }
    bwd.push_back(op);
  }
  backward = std::move(bwd);
}

}  // namespace dmuon::work
