#include "dmuon/work/parameter_tokens.hpp"

#include <algorithm>

namespace dmuon::work {
namespace {

// The nearest ancestor-or-self of `module` named `name`, or -1.
int ancestor_named(const model::ModuleTree& tree, int module, const std::string& name) {
  for (int m = module; m >= 0; m = tree.module(m).parent)
    if (tree.module(m).name == name) return m;
  return -1;
}

}  // namespace

std::optional<std::pair<std::int64_t, std::int64_t>> routed_expert(const model::Topology& t,
                                                                   int module) {
  const auto& tree = t.tree;
  std::string experts_name = "experts";
  std::int64_t top_k = 2;
  if (t.geometry) {
    const auto* stack = t.geometry->stack_of(tree, tree.module(module).path);
    if (!stack || !stack->moe) return std::nullopt;
    experts_name = stack->moe->experts;
    top_k = stack->moe->top_k;
  }
  const int container = ancestor_named(tree, module, experts_name);
  // The container itself holds no expert's weights; its descendants do. Without a geometry,
  // as the engine: the container's path must be "<path>.experts" (not a top-level module).
  if (container < 0 || container == module) return std::nullopt;
  if (!t.geometry && tree.module(container).parent == model::ModuleTree::root) return std::nullopt;
  const auto experts = static_cast<std::int64_t>(tree.module(container).children.size());
  if (experts < 1) return std::nullopt;
  return std::pair{std::min(top_k, experts), experts};
}

double stream_tokens_per_sample(const model::Topology& t, int module, std::int64_t seq_len) {
  if (!t.geometry) return static_cast<double>(seq_len);
  const auto& g = *t.geometry;
  const std::string& path = t.tree.module(module).path;
  const auto* stack = g.stack_of(t.tree, path);
  const model::TokenStream stream = stack ? stack->tokens : g.stream_of(path);
  switch (stream) {
    case model::TokenStream::vision: return static_cast<double>(g.vision_tokens);
    case model::TokenStream::action: return static_cast<double>(g.action_tokens);
    case model::TokenStream::text: break;
  }
  return static_cast<double>(seq_len);
}

double module_tokens_per_sample(const model::Topology& t, int module, std::int64_t seq_len) {
  const double tokens = stream_tokens_per_sample(t, module, seq_len);
  const auto routed = routed_expert(t, module);
  if (!routed) return tokens;
  return tokens * static_cast<double>(routed->first) / static_cast<double>(routed->second);
}

}  // namespace dmuon::work
