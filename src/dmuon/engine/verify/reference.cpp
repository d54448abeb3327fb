#include "dmuon/engine/verify/reference.hpp"

#include <algorithm>
#include <cmath>

#include "dmuon/base/error.hpp"
#include "dmuon/engine/exec/linear_work.hpp"
#include "dmuon/engine/exec/optimizer_step.hpp"
#include "dmuon/engine/step/grad_clip.hpp"
#include "dmuon/engine/step/optimizer_config.hpp"
#include "dmuon/engine/step/synthetic.hpp"
#include "dmuon/model/expert_local_tree.hpp"
#include "dmuon/plan/tp_local_tree.hpp"
#include "kernels/convert.hpp"
#include "kernels/tp_blocks.hpp"

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

namespace {

// One synthetic Linear of the reference: a parameter, or one TP shard of it.
struct Copy {
  LinearWork work;
  std::vector<float> w, g, m, v;
};

// The per-step bound on how far one AdamW step can move an element in the eps regime.
double eps_regime_bound(const EngineOptions& o) {
  // An element moves by lr · |m̂| / sqrt(v̂) per step; with a zero history before step t that
  // ratio is (1 − β1)/(1 − β1ᵗ) · sqrt((1 − β2ᵗ)/(1 − β2)): 1 at t = 1.
  const auto& c = adamw_config();
  double ratio = 1;
  for (long t = 1; t <= o.run.total_steps(); ++t)
    ratio = std::max(ratio, (1 - c.beta1) / (1 - std::pow(c.beta1, t)) *
                                std::sqrt((1 - std::pow(c.beta2, t)) / (1 - c.beta2)));
  return 2.0 * static_cast<double>(c.lr) * ratio;
}

class Reference {
 public:
  Reference(const model::ModuleTree& tree, const plan::Plan& plan, const EngineOptions& o,
            int dp_size)
      : plan_(plan),
        o_(o),
        local_(plan.tp.tp > 1 ? plan::tp_local_tree(tree, plan) : tree),
        logical_(tree),
        opt_(muon_config(o)) {
    const std::int64_t global = o.step.global_samples(dp_size);
    for (int pid : local_.parameter_order()) {
      const auto& p = local_.parameter(pid);
      const bool sharded = plan.tp.tp > 1 && plan.tp.is_sharded(pid);
      // --route adamw: AdamW; --ep: an expert by its route (no site holds it).
      const bool owner_or_expert =
          plan.hooks.site_of_param[static_cast<std::size_t>(pid)] >= 0 || plan.is_expert(pid);
      muon_.push_back(owner_or_expert && plan.muon(pid) && traits(o.step.method).muon);
      copies_.emplace_back();
      const auto n = static_cast<std::size_t>(p.numel());
      // --ep: a local expert stands for E experts of the full model, one per EP rank, each
      // keyed by its name there.
      const int copies = sharded ? plan.tp.tp : plan.is_expert(pid) ? plan.config.ep : 1;
      for (int t = 0; t < copies; ++t) {
        const std::uint64_t key =
            sharded               ? tp_shard_key(pid, t)
            : plan.is_expert(pid) ? expert_data_key(model::global_parameter_name(local_, pid, t))
                                  : static_cast<std::uint64_t>(pid);
        // One rank holding every sample.
        Copy c{LinearWork(local_, pid, global, 0, 1, o.step.accum, key, o.step.compute_of(pid)),
               std::vector<float>(n), std::vector<float>(n, 0.0f), std::vector<float>(n, 0.0f),
               std::vector<float>(n, 0.0f)};
        init_weights(o.run.seed, key, c.w.data(), p.numel(), matrix_shape(p).cols);
        copies_.back().push_back(std::move(c));
      }
    }
  }

  void run(AdamwEpsRegime* regime) {
    const auto& order = local_.parameter_order();
    if (regime) {
      regime->elements.assign(order.size(), {});
      regime->bound_per_step = eps_regime_bound(o_);
    }
    for (long s = 1; s <= o_.run.total_steps(); ++s) {
      gradients(s);
      for (std::size_t i = 0; i < order.size(); ++i) {
        if (muon_[i])
          muon(i, s);
        else
          adamw(i, s, regime);
      }
    }
  }

  std::vector<std::vector<float>> weights(int tp_rank, int ep_rank) {
    std::vector<std::vector<float>> out;
    const auto& order = local_.parameter_order();
    for (std::size_t i = 0; i < copies_.size(); ++i) {
      auto& c = copies_[i];
      const int pick = c.size() == 1 ? 0 : plan_.is_expert(order[i]) ? ep_rank : tp_rank;
      out.push_back(std::move(c[static_cast<std::size_t>(pick)].w));
    }
    return out;
  }

 private:
  const std::string& name(std::size_t i) const {
    return local_.parameter(local_.parameter_order()[i]).name;
  }
  CheckFailure bad(std::size_t i, const char* what) const {
    return CheckFailure(std::string("--check reference: non-finite ") + what + " in '" + name(i) +
                        "'");
  }

  // Every gradient first: K micro-batches accumulated (accumulation.hpp), then the clip over
  // every element of every gradient (grad_clip.hpp; TP: each shard once).
  void gradients(long s) {
    const auto& order = local_.parameter_order();
    for (std::size_t i = 0; i < copies_.size(); ++i) {
      const Compute compute = o_.step.compute_of(order[i]);  // none for a looked-up table
      for (auto& c : copies_[i])
        for (int j = 0; j < o_.step.accum; ++j) {
          c.work.set_micro(j);
          c.work.forward(compute, o_.run.seed, s, c.w.data());
          c.work.backward(compute, o_.run.seed, s, c.w.data(), c.g.data(), {}, j > 0);
        }
    }
    if (o_.step.clip_norm <= 0) return;
    std::vector<GradSpan> spans;
    for (auto& param : copies_)
      for (auto& c : param) spans.push_back({c.g.data(), static_cast<std::int64_t>(c.g.size())});
    clip_in_place(o_, spans);
  }

  void adamw(std::size_t i, long s, AdamwEpsRegime* regime) {
    for (auto& c : copies_[i]) {
      if (regime) flag_eps_regime(c.g, regime->elements[i]);
      if (opt_.adamw(c.w.data(), c.g.data(), c.m.data(), c.v.data(), c.w.size(), s) != 0)
        throw bad(i, "gradient");
    }
  }

  // --ep: each EP rank's copy of an expert is its own matrix.
  void expert_muon(std::size_t i, long s) {
    const auto shape = matrix_shape(local_.parameter(local_.parameter_order()[i]));
    for (auto& c : copies_[i]) {
      x_.resize(c.w.size());
      if (opt_.prepare(c.g.data(), c.m.data(), x_.data(), x_.size(), s) != 0)
        throw bad(i, "gradient");
      opt_.newton_schulz(x_.data(), shape.rows, shape.cols, name(i));
      if (opt_.apply(c.w.data(), x_.data(), x_.size(), shape.rows, shape.cols) != 0)
        throw bad(i, "weight");
    }
  }

  void muon(std::size_t i, long s) {
    if (plan_.is_expert(local_.parameter_order()[i])) return expert_muon(i, s);
    auto& param = copies_[i];
    const std::size_t n = param.front().w.size();
    x_.resize(n * param.size());
    for (std::size_t t = 0; t < param.size(); ++t)
      if (opt_.prepare(param[t].g.data(), param[t].m.data(), x_.data() + t * n, n, s) != 0)
        throw bad(i, "gradient");
    const int pid = local_.parameter_order()[i];
    const auto logical = matrix_shape(logical_.parameter(pid));
    float* matrix = x_.data();
    if (param.size() > 1) {
      // The TP owner's Newton–Schulz on the logical matrix of the T shards as the gather sends
      // them (bf16 wire: each rounded to nearest even).
      if (o_.step.wire == kernels::Dtype::bf16)
        for (float& e : x_) e = kernels::host::bf16_to_float(kernels::host::float_to_bf16(e));
      full_.resize(x_.size());
      kernels::host::tp_assemble(x_.data(), full_.data(), logical.rows, logical.cols,
                                 plan_.tp.shard_dim[static_cast<std::size_t>(pid)], plan_.tp.tp);
      matrix = full_.data();
    }
    opt_.newton_schulz(matrix, logical.rows, logical.cols, name(i));
    if (param.size() > 1)
      kernels::host::tp_split(full_.data(), x_.data(), logical.rows, logical.cols,
                              plan_.tp.shard_dim[static_cast<std::size_t>(pid)], plan_.tp.tp);
    for (std::size_t t = 0; t < param.size(); ++t)
      if (opt_.apply(param[t].w.data(), x_.data() + t * n, n, logical.rows, logical.cols) != 0)
        throw bad(i, "weight");
  }

  const plan::Plan& plan_;
  const EngineOptions& o_;
  model::ModuleTree local_;
  const model::ModuleTree& logical_;
  HostOptimizer opt_;
  std::vector<bool> muon_;
  std::vector<std::vector<Copy>> copies_;  // per parameter: itself, or its T TP shards
  std::vector<float> x_, full_;
};

}  // namespace

std::vector<std::vector<float>> reference_weights(const model::ModuleTree& tree,
                                                  const plan::Plan& plan, const EngineOptions& o,
                                                  int dp_size, AdamwEpsRegime* regime, int tp_rank,
                                                  int ep_rank) {
  Reference ref(tree, plan, o, dp_size);
  ref.run(regime);
  return ref.weights(tp_rank, ep_rank);
}

}  // namespace dmuon::engine
