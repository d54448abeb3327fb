#pragma once
// Which ranks train on how many samples of which parameter (engine/step/synthetic.hpp:
// sample_range), grouped: a parameter's global sample count n depends only on the global batch
// and, for a routed expert, its layer's expert count, so a model has a handful of distinct n;
// rank r takes n·(r+1)/N − n·r/N of each, and ranks with the same counts for every distinct n
// form one sample class. Forward and backward costs are equal within a class.
// With --accum K the counts are per micro-step (engine/step/accumulation.hpp: micro_sample_range):
// a class is then the same counts for every distinct n in every micro-step.

#include <cstdint>
#include <vector>

#include "dmuon/model/module_tree.hpp"
#include "dmuon/plan/plan.hpp"

namespace dmuon::project {

class SampleClasses {
 public:
  /// `global` samples split over `world` ranks (every world rank takes its share, as the engine
  /// does for every method). With `plan` under --ep, a routed expert's samples split over its
  /// expert group instead (engine::ParamLayout::data_rank): at E = G its one holder takes all.
  SampleClasses(const model::ModuleTree& tree, std::int64_t global, int world, int accum = 1,
                const plan::Plan* plan = nullptr);

  int classes() const { return static_cast<int>(class_locals_.size()); }
  int class_of(int rank) const { return class_of_rank_[static_cast<std::size_t>(rank)]; }
  /// Local samples of parameter `pid` on ranks of class `cls` in micro-step `micro`.
  std::int64_t local(int pid, int cls, int micro = 0) const {
    return class_locals_[static_cast<std::size_t>(cls)][static_cast<std::size_t>(
        micro * static_cast<int>(distinct_n_.size()) + n_index_[static_cast<std::size_t>(pid)])];
  }
  /// Global samples of parameter `pid` (engine::param_samples).
  std::int64_t samples(int pid) const {
    return distinct_n_[static_cast<std::size_t>(n_index_[static_cast<std::size_t>(pid)])];
  }

 private:
  std::vector<std::int64_t> distinct_n_;
  std::vector<char> distinct_expert_;                    // per distinct n: split over experts
  std::vector<int> n_index_;                             // per pid
  std::vector<std::vector<std::int64_t>> class_locals_;  // per class, per (micro, distinct n)
  std::vector<int> class_of_rank_;
};

}  // namespace dmuon::project
