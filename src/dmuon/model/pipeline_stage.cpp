#include "dmuon/model/pipeline_stage.hpp"

#include <fmt/format.h>

#include "dmuon/base/error.hpp"
#include "dmuon/model/kept_modules.hpp"

namespace dmuon::model {
namespace {

const StackGeometry& single_stack(const Topology& t, int stages) {
  if (!t.geometry || t.geometry->stacks.size() != 1)
    throw InputError(fmt::format(
        "--pp {}: topology '{}' has {} (valid: a model with one stack of blocks and a geometry, "
        "such as the llm and moe-llm presets)",
        stages, t.name,
        t.geometry ? fmt::format("{} stacks", t.geometry->stacks.size()) : "no geometry"));
  return t.geometry->stacks.front();
}

}  // namespace

std::vector<int> stage_blocks(int blocks, int stages, int chunks, int stage) {
  const int n = stages * chunks, base = blocks / n, extra = blocks % n;
  std::vector<int> out;
  int first = 0;
  for (int c = 0; c < n; ++c) {
    const int size = base + (c < extra ? 1 : 0);
    if (c % stages == stage)
      for (int b = first; b < first + size; ++b) out.push_back(b);
    first += size;
  }
  return out;
}

Topology pipeline_stage(const Topology& whole, int stages, int chunks, int stage) {
  const StackGeometry& s = single_stack(whole, stages);
  const ModuleTree& tree = whole.tree;
  const auto blocks = stack_blocks(s, tree);
  const std::size_t n = s.single_block ? 1 : blocks.size();
  if (static_cast<int>(n) < stages * chunks)
    throw InputError(fmt::format(
        "--pp {}: stack '{}' has {} block{}, fewer than the {} chunks of {} ranks x {} (valid: "
        "{})",
        stages, s.name, n, n == 1 ? "" : "s", stages * chunks, stages, chunks,
        n == 1 ? "a model of 2 or more blocks"
               : fmt::format("--pp and --pp-chunks with P x v <= {}", n)));
  const auto& g = *whole.geometry;
  const bool first = stage == 0, last = stage == stages - 1;
  std::vector<char> kept(tree.num_modules(), 1);
  for (int b : blocks) kept[b] = 0;
  for (int k : stage_blocks(static_cast<int>(blocks.size()), stages, chunks, stage))
    kept[blocks[k]] = 1;
  const auto drop = [&](const std::string& path, bool keep) {
    if (!path.empty() && !keep) kept[*tree.find_module(path)] = 0;
  };
  drop(g.embedding, first);
  drop(g.final_norm, last);
  drop(g.head, last);
  // Every other module with parameters must lie on the ranks' path through the stack.
  for (int m : tree.preorder()) {
    const Module& mod = tree.module(m);
    if (mod.params.empty() || path_under(mod.path, s.blocks)) continue;
    const auto in = [&](const std::string& part) {
      return !part.empty() && path_under(mod.path, part);
    };
    const bool placed = in(g.embedding) || in(g.final_norm) || in(g.head);
    if (!placed)
      throw InputError(fmt::format(
          "--pp {}: module '{}' holds parameters outside the blocks, the embedding, the final "
          "norm and the head: which rank holds it is not known (valid: --pp 1)",
          stages, mod.path));
  }
  Topology out = whole;
  out.tree = kept_modules(tree, kept, [&](const std::string& name) {
    return fmt::format(
        "--pp {}: parameter '{}' is tied across pipeline ranks (a head tied to the "
        "embedding; valid: --pp 1)",
        stages, name);
  });
  auto& og = *out.geometry;
  if (!first) og.embedding.clear();
  if (!last) {
    og.final_norm.clear();
    og.final_norm_kind = NormKind::none;
    og.head.clear();
  }
  return out;
}

std::string stage_summary(const Topology& whole, int stages, int chunks, int stage) {
  const StackGeometry& s = single_stack(whole, stages);
  const int n = static_cast<int>(stack_blocks(s, whole.tree).size());
  const auto mine = stage_blocks(n, stages, chunks, stage);
  std::string out;
  for (std::size_t i = 0; i < mine.size(); ++i) {
    std::size_t j = i;
    while (j + 1 < mine.size() && mine[j + 1] == mine[j] + 1) ++j;
    out += fmt::format("{}{}", out.empty() ? "blocks " : ", ",
                       i == j ? std::to_string(mine[i]) : fmt::format("{}-{}", mine[i], mine[j]));
    i = j;
  }
  if (stage == 0 && !whole.geometry->embedding.empty()) out += " + embedding";
  if (stage == stages - 1 && !whole.geometry->head.empty()) out += " + head";
  return out;
}

}  // namespace dmuon::model
