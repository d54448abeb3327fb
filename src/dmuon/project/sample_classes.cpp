#include "dmuon/project/sample_classes.hpp"

#include <algorithm>
#include <map>

#include "dmuon/engine/step/accumulation.hpp"
#include "dmuon/engine/step/synthetic.hpp"

namespace dmuon::project {

SampleClasses::SampleClasses(const model::ModuleTree& tree, std::int64_t global, int world,
                             int accum) {
  n_index_.assign(tree.num_parameters(), 0);
  for (int pid = 0; pid < static_cast<int>(tree.num_parameters()); ++pid) {
    const std::int64_t n = engine::param_samples(tree, pid, global);
    auto it = std::find(distinct_n_.begin(), distinct_n_.end(), n);
    if (it == distinct_n_.end()) it = distinct_n_.insert(distinct_n_.end(), n);
    n_index_[static_cast<std::size_t>(pid)] = static_cast<int>(it - distinct_n_.begin());
  }
  if (distinct_n_.empty()) distinct_n_.push_back(global);
  std::map<std::vector<std::int64_t>, int> id;
  class_of_rank_.resize(static_cast<std::size_t>(world));
  const std::size_t d = distinct_n_.size();
  std::vector<std::int64_t> locals(static_cast<std::size_t>(accum) * d);
  for (int r = 0; r < world; ++r) {
    for (int j = 0; j < accum; ++j)
      for (std::size_t i = 0; i < d; ++i) {
        // engine::micro_sample_range (accum 1: engine::sample_range, [n·r/N, n·(r+1)/N))
        const auto range = engine::micro_sample_range(distinct_n_[i], j, accum, r, world);
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
