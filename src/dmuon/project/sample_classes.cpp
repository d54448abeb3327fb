#include "dmuon/project/sample_classes.hpp"

#include <algorithm>
#include <map>

#include "dmuon/engine/step/accumulation.hpp"
#include "dmuon/engine/step/synthetic.hpp"

namespace dmuon::project {

SampleClasses::SampleClasses(const model::ModuleTree& tree, std::int64_t global, int world,
                             int accum, const plan::Plan* plan) {
  n_index_.assign(tree.num_parameters(), 0);
  for (int pid = 0; pid < static_cast<int>(tree.num_parameters()); ++pid) {
    const std::int64_t n = engine::param_samples(tree, pid, global);
    const char expert = plan != nullptr && plan->is_expert(pid) ? 1 : 0;
    std::size_t i = 0;
    while (i < distinct_n_.size() && (distinct_n_[i] != n || distinct_expert_[i] != expert)) ++i;
    if (i == distinct_n_.size()) {
      distinct_n_.push_back(n);
      distinct_expert_.push_back(expert);
    }
    n_index_[static_cast<std::size_t>(pid)] = static_cast<int>(i);
  }
  if (distinct_n_.empty()) {
    distinct_n_.push_back(global);
    distinct_expert_.push_back(0);
  }
  // --ep (R = T = 1: DP rank r is world rank r): its experts' share is its index among the
  // G/E ranks of its expert group.
  const RankGrid grid = plan != nullptr ? plan->grid() : RankGrid{};
  const int replicas = plan != nullptr ? plan->expert_replicas() : 1;
  std::map<std::vector<std::int64_t>, int> id;
  class_of_rank_.resize(static_cast<std::size_t>(world));
  const std::size_t d = distinct_n_.size();
  std::vector<std::int64_t> locals(static_cast<std::size_t>(accum) * d);
  for (int r = 0; r < world; ++r) {
    for (int j = 0; j < accum; ++j)
      for (std::size_t i = 0; i < d; ++i) {
        // engine::micro_sample_range (accum 1: engine::sample_range, [n·r/N, n·(r+1)/N))
        const auto range = distinct_expert_[i]
                               ? engine::micro_sample_range(distinct_n_[i], j, accum,
                                                            grid.expert_replica(r), replicas)
                               : engine::micro_sample_range(distinct_n_[i], j, accum, r, world);
        locals[static_cast<std::size_t>(j) * d + i] = range.end - range.begin;
      }
    auto it = id.find(locals);
    if (it == id.end()) {
      it = id.emplace(locals, static_cast<int>(class_locals_.size())).first;
      class_locals_.push_back(locals);
    }
    class_of_rank_[static_cast<std::size_t>(r)] = it->second;
  }
}

}  // namespace dmuon::project
