#pragma once
// Internal to the work model: collects a unit's forward ops and, per forward step, the ops its
// backward runs; the backward comes out in reverse step order. Also the module-tree queries
// the builders share (a module's linear weight, a subtree in pre-order).

#include <cstdint>
#include <optional>
#include <vector>

#include "dmuon/model/module_tree.hpp"
#include "dmuon/work/op.hpp"
#include "dmuon/work/step_work.hpp"

namespace dmuon::work::detail {

/// A module holding a 2-D "weight" (out × in), and whether it has a 1-D "bias".
struct Linear {
  int module = -1, param = -1;
  std::int64_t in = 0, out = 0;
  bool bias = false;
};
std::optional<Linear> linear_of(const model::ModuleTree& tree, int module);

/// `module` and its descendants in registration pre-order.
std::vector<int> subtree(const model::ModuleTree& tree, int module);

/// Whether a module is a norm (its type names one) holding a 1-D weight; its kind.
std::optional<model::NormKind> norm_of(const model::ModuleTree& tree, int module);

class UnitBuilder {
 public:
  /// Appends one forward step: its ops (module set to `module` where unset) and its backward.
  void add(OpPair p, int module);
  /// A parameter's linear over `tokens` rows (module and param set). `input_kept`: an earlier
  /// op of the unit already keeps its input for backward (a shared normed input, the
  /// attention's output), so the linear adds no saved bytes.
  void linear(const Linear& l, double tokens, double e, bool input_kept = false);
  /// Experts' linears, one grouped GEMM per position `member` inside an expert.
  void grouped_linear(const Linear& first, int container, int member, std::int64_t experts,
                      double tokens_per_expert, double e, bool input_kept = false);

  /// Moves the ops into `unit` (forward, and backward in reverse step order).
  void finish(WorkUnit& unit);

 private:
  std::vector<Op> forward_;
  std::vector<std::vector<Op>> backward_;
};

}  // namespace dmuon::work::detail
