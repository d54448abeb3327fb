#include "dmuon/engine/reference.hpp"

#include <algorithm>
#include <cmath>

#include "dmuon/base/error.hpp"
#include "dmuon/engine/grad_clip.hpp"
#include "dmuon/engine/linear_work.hpp"
#include "dmuon/engine/optimizer_config.hpp"
#include "dmuon/engine/optimizer_step.hpp"

namespace dmuon::engine {

namespace {

// The elements of one AdamW gradient that cancelled to the rounding level (AdamwEpsRegime).
void flag_eps_regime(const std::vector<float>& g,
                     std::vector<std::pair<std::int64_t, int>>& flagged) {
  double sum2 = 0;
  for (float v : g) sum2 += static_cast<double>(v) * v;
  if (g.empty() || sum2 == 0) return;
  const double limit = AdamwEpsRegime::kRelative * std::sqrt(sum2 / static_cast<double>(g.size()));
  for (std::size_t j = 0; j < g.size(); ++j) {
    // An exact zero has no terms to cancel (an embedding row no sample used): every order
    // sums it to 0, so a difference there is a bug, never excused.
    if (g[j] == 0.0f || std::fabs(static_cast<double>(g[j])) > limit) continue;
    const auto e = static_cast<std::int64_t>(j);
    const auto it = std::lower_bound(
        flagged.begin(), flagged.end(), e,
        [](const std::pair<std::int64_t, int>& a, std::int64_t b) { return a.first < b; });
    if (it != flagged.end() && it->first == e)
      ++it->second;
    else
      flagged.insert(it, {e, 1});
  }
}

}  // namespace

std::vector<std::vector<float>> reference_weights(const model::ModuleTree& tree,
                                                  const plan::Plan& plan, const EngineOptions& o,
                                                  int shard, AdamwEpsRegime* regime) {
  const std::int64_t global = o.global_samples(shard);
  const auto& order = tree.parameter_order();
  HostOptimizer opt(muon_config(o));
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
              plan.muon(order[i]) && o.method != Method::fsdp_adamw;  // --route adamw: AdamW
    work.emplace_back(tree, order[i], global, 0, 1, o.accum);  // one rank holding every sample
  }
  if (regime) {
    regime->elements.assign(order.size(), {});
    // An element moves by lr · |m̂| / sqrt(v̂) per step; with a zero history before step t
    // that ratio is (1 − β1)/(1 − β1ᵗ) · sqrt((1 − β2ᵗ)/(1 − β2)): 1 at t = 1.
    const auto& c = adamw_config();
    double ratio = 1;
    for (long t = 1; t <= o.total_steps(); ++t)
      ratio = std::max(ratio, (1 - c.beta1) / (1 - std::pow(c.beta1, t)) *
                                  std::sqrt((1 - std::pow(c.beta2, t)) / (1 - c.beta2)));
    regime->bound_per_step = 2.0 * static_cast<double>(c.lr) * ratio;
  }
  std::vector<float> x;
  for (long s = 1; s <= o.total_steps(); ++s) {
    // Every gradient first: K micro-batches accumulated (accumulation.hpp).
    for (std::size_t i = 0; i < order.size(); ++i)
      for (int j = 0; j < o.accum; ++j) {
        work[i].set_micro(j);
        work[i].forward(o.compute, o.seed, s, w[i].data());
        work[i].backward(o.compute, o.seed, s, w[i].data(), grad[i].data(), {}, j > 0);
      }
    if (o.clip_norm > 0) {  // grad_clip.hpp: one norm over every element of every gradient
      std::vector<GradSpan> spans;
      for (auto& g : grad) spans.push_back({g.data(), static_cast<std::int64_t>(g.size())});
      clip_in_place(o, spans);
    }
    for (std::size_t i = 0; i < order.size(); ++i) {
      const auto n = w[i].size();
      const auto& name = tree.parameter(order[i]).name;
      if (!muon[i]) {
        if (regime) flag_eps_regime(grad[i], regime->elements[i]);
        if (opt.adamw(w[i].data(), grad[i].data(), m[i].data(), v[i].data(), n, s) != 0)
          throw CheckFailure("--check reference: non-finite gradient in '" + name + "'");
        continue;
      }
      const auto shape = matrix_shape(tree.parameter(order[i]));
      x.resize(n);
      if (opt.prepare(grad[i].data(), m[i].data(), x.data(), n, s) != 0)
        throw CheckFailure("--check reference: non-finite gradient in '" + name + "'");
      opt.newton_schulz(x.data(), shape.rows, shape.cols, name);
      if (opt.apply(w[i].data(), x.data(), n, shape.rows, shape.cols) != 0)
        throw CheckFailure("--check reference: non-finite weight in '" + name + "'");
    }
  }
  return w;
}

}  // namespace dmuon::engine
