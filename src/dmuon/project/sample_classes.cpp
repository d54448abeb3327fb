#include "dmuon/project/sample_classes.hpp"

#include <algorithm>
#include <map>

#include "dmuon/engine/synthetic.hpp"

namespace dmuon::project {

SampleClasses::SampleClasses(const model::ModuleTree& tree, std::int64_t global, int world) {
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
  std::vector<std::int64_t> locals(distinct_n_.size());
  for (int r = 0; r < world; ++r) {
    for (std::size_t i = 0; i < distinct_n_.size(); ++i) {
      // engine::sample_range: [n·r/N, n·(r+1)/N)
      const std::int64_t n = distinct_n_[i];
      locals[i] = n * (r + 1) / world - n * r / world;
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
