#include "dmuon/model/expert_local_tree.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "dmuon/base/error.hpp"
#include "dmuon/model/kept_modules.hpp"

namespace dmuon::model {

namespace {

// "0", "1", ...: a child's name as the index it must have.
bool named_index(const std::string& name, std::size_t index) {
  std::size_t value = 0;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), value);
  return ec == std::errc() && end == name.data() + name.size() && value == index &&
         (name.size() == 1 || name[0] != '0');
}

bool is_expert_container(const ModuleTree& tree, int m) {
  const Module& mod = tree.module(m);
  if (mod.parent < 0 || mod.name != "experts" || mod.children.empty()) return false;
  for (std::size_t j = 0; j < mod.children.size(); ++j)
    if (!named_index(tree.module(mod.children[j]).name, j)) return false;
  return true;
}

// Modules a and b have the same names, types and parameters (attribute, shape, dtype) all the
// way down: expert b can stand where the EP rank's tree has expert a.
bool same_structure(const ModuleTree& tree, int a, int b) {
  const Module &ma = tree.module(a), &mb = tree.module(b);
  if (ma.type != mb.type || ma.children.size() != mb.children.size() ||
      ma.params.size() != mb.params.size())
    return false;
  for (std::size_t i = 0; i < ma.params.size(); ++i) {
    const Parameter &pa = tree.parameter(ma.params[i]), &pb = tree.parameter(mb.params[i]);
    if (pa.shape != pb.shape || pa.dtype != pb.dtype ||
        tree.holder_name(pa.holders.front()).substr(ma.path.size()) !=
            tree.holder_name(pb.holders.front()).substr(mb.path.size()))
      return false;
  }
  for (std::size_t i = 0; i < ma.children.size(); ++i)
    if (tree.module(ma.children[i]).name != tree.module(mb.children[i]).name ||
        !same_structure(tree, ma.children[i], mb.children[i]))
      return false;
  return true;
}

// Per module of `tree`: kept in an EP rank's tree (the first experts/E experts of each
// container and everything outside the containers; kept_modules drops their descendants).
std::vector<char> kept_experts(const ModuleTree& tree, int ep) {
  std::vector<char> kept(tree.num_modules(), 1);
  for (int c : expert_containers(tree)) {
    const auto& children = tree.module(c).children;
    const std::size_t n = children.size();
    if (n % static_cast<std::size_t>(ep) != 0)
      throw InputError(fmt::format(
          "--ep {} does not divide the {} experts of '{}' (valid: a divisor of every expert "
          "container's count)",
          ep, n, tree.module(c).path));
    // Every EP rank's tree is this one: expert j stands for e·n/E + j on rank e, so they must
    // be alike.
    const std::size_t per_rank = n / static_cast<std::size_t>(ep);
    for (std::size_t j = per_rank; j < n; ++j) {
      if (!same_structure(tree, children[j % per_rank], children[j]))
        throw InputError(fmt::format(
            "--ep {}: expert '{}' differs from '{}' in its modules or parameter shapes (valid: "
            "--ep with alike experts: each rank's model has the same shapes)",
            ep, tree.module(children[j]).path, tree.module(children[j % per_rank]).path));
      kept[children[j]] = 0;
    }
  }
  return kept;
}

}  // namespace

std::vector<int> expert_containers(const ModuleTree& tree) {
  std::vector<int> out;
  for (int m : tree.preorder())
    if (is_expert_container(tree, m)) out.push_back(m);
  return out;
}

bool experts_split_over(const ModuleTree& tree, int ep) {
  const auto containers = expert_containers(tree);
  if (ep <= 1 || containers.empty()) return false;
  return std::all_of(containers.begin(), containers.end(), [&](int m) {
    return tree.module(m).children.size() % static_cast<std::size_t>(ep) == 0;
  });
}

ModuleTree expert_local_tree(const ModuleTree& tree, int ep) {
  if (ep < 1) throw InputError(fmt::format("--ep {} is invalid (valid: >= 1)", ep));
  if (expert_containers(tree).empty())
    throw InputError(fmt::format(
        "--ep {}: the model has no routed experts (no module 'experts' with children 0, 1, ...)",
        ep));
  return kept_modules(
      tree, kept_experts(tree, ep),
      [&](const std::string& name) {
        return fmt::format("--ep: parameter '{}' is tied to a routed expert another EP rank holds",
                           name);
      },
      [&](int from, int to, ModuleTree& out) {
        if (is_expert_container(tree, from)) out.set_ep_size(to, ep * tree.module(from).ep_size);
      });
}

ExpertSlot expert_slot(const ModuleTree& local, int pid) {
  for (int m = local.parameter(pid).holders.front().module; m >= 0; m = local.module(m).parent) {
    const int parent = local.module(m).parent;
    if (parent >= 0 && is_expert_container(local, parent)) {
      const auto& siblings = local.module(parent).children;
      const auto at = std::find(siblings.begin(), siblings.end(), m) - siblings.begin();
      return {parent, static_cast<int>(at)};
    }
  }
  return {};
}

std::string global_parameter_name(const ModuleTree& local, int pid, int ep_rank) {
  const std::string& name = local.parameter(pid).name;
  const ExpertSlot slot = expert_slot(local, pid);
  if (slot.container < 0) return name;
  const Module& container = local.module(slot.container);
  const auto per_rank = static_cast<std::int64_t>(container.children.size());
  const std::int64_t global = static_cast<std::int64_t>(ep_rank) * per_rank + slot.local;
  // "<container>.<j>.<rest>" -> "<container>.<global>.<rest>"
  const std::size_t head = container.path.size() + 1;
  const std::size_t dot = name.find('.', head);
  if (name.compare(0, head, container.path + ".") != 0 || dot == std::string::npos) return name;
  return name.substr(0, head) + std::to_string(global) + name.substr(dot);
}

}  // namespace dmuon::model
