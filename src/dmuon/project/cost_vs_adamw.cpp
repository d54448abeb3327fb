#include "dmuon/project/cost_vs_adamw.hpp"

#include <algorithm>

namespace dmuon::project {
namespace {

double step_ms(const Projection& p) {
  return p.result.phases_ms[static_cast<std::size_t>(engine::Phase::step)];
}

double phase_ms(const Projection& p, engine::Phase phase) {
  return p.result.phases_ms[static_cast<std::size_t>(phase)];
}

}  // namespace

std::vector<std::pair<std::string, double>> cost_vs_adamw(
    const model::ModuleTree& tree, const plan::Plan& plan, const Machine& machine,
    const ProjectionOptions& dmuon_options, const Projection& dmuon, const Projection& adamw) {
  using engine::Phase;
  ProjectionOptions o = dmuon_options;
  o.trace = nullptr;  // the counterfactuals are not the row's timeline
  engine::StepRunModel model = engine::step_run_model(o.engine.step);
  const auto replay = [&](const ProjectionOptions& x) { return project(tree, plan, machine, x); };
  const double x0 = step_ms(dmuon);
  model.comm_issue_order = false;
  o.run_model = model;
  const double x1 = step_ms(replay(o));
  model.serial_rooted_calls = false;
  o.run_model = model;
  const double x2 = step_ms(replay(o));
  model.barrier = false;
  o.run_model = model;
  const Projection p3 = replay(o);
  o.free_newton_schulz = true;
  const Projection p4 = replay(o);
  const double x3 = step_ms(p3), x4 = step_ms(p4);
  const double optimizer = x3 - x4;
  const double publish =
      std::clamp(phase_ms(p3, Phase::forward_comm) - phase_ms(p4, Phase::forward_comm), 0.0,
                 std::max(0.0, optimizer));
  const double reduce_tail =
      phase_ms(p3, Phase::backward_comm) - phase_ms(adamw, Phase::backward_comm);
  return {{kCostTerms[0], x0 - x1},
          {kCostTerms[1], x1 - x2},
          {kCostTerms[2], x2 - x3},
          {kCostTerms[3], optimizer - publish},
          {kCostTerms[4], publish},
          {kCostTerms[5], reduce_tail},
          {kCostTerms[6], x4 - step_ms(adamw) - reduce_tail}};
}

std::vector<std::pair<std::string, std::int64_t>> memory_vs_adamw(const RankMemory& dmuon,
                                                                  const RankMemory& adamw) {
  std::vector<std::pair<std::string, std::int64_t>> out;
  const auto a = adamw.terms();
  const auto d = dmuon.terms();
  for (std::size_t i = 0; i < d.size(); ++i)
    out.emplace_back(d[i].first, d[i].second - a[i].second);
  out.emplace_back("peak", dmuon.peak() - adamw.peak());
  return out;
}

}  // namespace dmuon::project
