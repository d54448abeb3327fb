#include "dmuon/engine/reference.hpp"

#include <algorithm>
#include <cmath>

#include "dmuon/engine/optimizer.hpp"
#include "dmuon/engine/synthetic.hpp"

namespace dmuon::engine {

std::vector<std::vector<float>> reference_weights(const model::ModuleTree& tree,
                                                  const plan::Plan& plan, const EngineOptions& o,
                                                  int shard) {
  const std::int64_t global = o.global_samples(shard);
  const auto& order = tree.parameter_order();
  const auto& mc = muon_config();
  const auto& ac = adamw_config();
  NsWorkspaces ns;
  std::vector<std::vector<float>> w(order.size()), grad(order.size()), m(order.size()),
      v(order.size());
  std::vector<LinearWork> work;
  std::vector<bool> muon(order.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    const auto& p = tree.parameter(order[i]);
    const auto n = static_cast<std::size_t>(p.numel());
    w[i].resize(n);
    init_weights(o.seed, order[i], w[i].data(), p.numel(), matrix_shape(p).cols);
    grad[i].assign(n, 0.0f);
    m[i].assign(n, 0.0f);
    v[i].assign(n, 0.0f);
    muon[i] = plan.hooks.site_of_param[static_cast<std::size_t>(order[i])] >= 0 &&
              o.method != Method::fsdp_adamw;
    work.emplace_back(tree, order[i], global, 0, 1);  // one rank holding every sample
  }
  std::vector<float> input, out;
  for (long s = 1; s <= o.total_steps(); ++s) {
    for (std::size_t i = 0; i < order.size(); ++i) {
      work[i].forward(o.compute, o.seed, s, w[i].data());
      work[i].backward(o.compute, o.seed, s, w[i].data(), grad[i].data());
      const auto n = w[i].size();
      const auto shape = matrix_shape(tree.parameter(order[i]));
      if (!muon[i]) {
        kernels::host::adamw_step(w[i].data(), grad[i].data(), m[i].data(), v[i].data(), n, s, ac);
        continue;
      }
      input.resize(n);
      out.resize(n);
      kernels::host::muon_momentum(grad[i].data(), m[i].data(), input.data(), n, s, mc.momentum,
                                   mc.nesterov);
      const auto rows = static_cast<std::size_t>(shape.rows),
                 cols = static_cast<std::size_t>(shape.cols);
      kernels::host::newton_schulz(input.data(), out.data(), rows, cols, mc.ns,
                                   ns.get(shape.rows, shape.cols));
      kernels::host::muon_apply(w[i].data(), out.data(), n, mc.lr, mc.weight_decay,
                                kernels::muon_scale(rows, cols));
    }
  }
  return w;
}

double max_relative_error(const model::ModuleTree& tree, const std::vector<std::vector<float>>& a,
                          const std::vector<std::vector<float>>& b, std::string* worst) {
  if (a.size() != b.size()) return INFINITY;
  double worst_err = 0;
  const auto& order = tree.parameter_order();
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].size() != b[i].size()) return INFINITY;
    double diff2 = 0, ref2 = 0;
    for (std::size_t j = 0; j < a[i].size(); ++j) {
      const double d = static_cast<double>(a[i][j]) - b[i][j];
      diff2 += d * d;
      ref2 += static_cast<double>(b[i][j]) * b[i][j];
    }
    double err = std::sqrt(diff2) / std::max(std::sqrt(ref2), 1e-30);
    if (std::isnan(err)) err = INFINITY;
    if (err > worst_err || (worst && worst->empty())) {
      worst_err = std::max(worst_err, err);
      if (worst && i < order.size()) *worst = tree.parameter(order[i]).name;
    }
  }
  return worst_err;
}

}  // namespace dmuon::engine
