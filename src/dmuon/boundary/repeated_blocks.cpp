#include "dmuon/boundary/repeated_blocks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace dmuon::boundary {
namespace {

bool index_name(const std::string& name) {
  return !name.empty() &&
         std::all_of(name.begin(), name.end(), [](unsigned char c) { return std::isdigit(c); });
}

bool repeated_block_container(const model::ModuleTree& tree, const model::Module& m) {
  if (m.children.size() < 2) return false;
  const std::string& type = tree.module(m.children.front()).type;
  return std::all_of(m.children.begin(), m.children.end(), [&](int c) {
    const auto& child = tree.module(c);
    return child.type == type && index_name(child.name) && !child.children.empty();
  });
}

void search(const model::ModuleTree& tree, int module, RepeatedBlocks& out) {
  const auto& m = tree.module(module);
  if (repeated_block_container(tree, m)) {
    out.containers.push_back(module);
    out.blocks.insert(out.blocks.end(), m.children.begin(), m.children.end());
    return;  // outermost only: blocks inside the blocks are not units
  }
  for (int c : m.children) search(tree, c, out);
}

// RE2 syntax: every ASCII character other than a letter, digit or '_' escaped.
std::string quote_regex(const std::string& text) {
  std::string out;
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x80 && !std::isalnum(u) && c != '_') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

RepeatedBlocks find_repeated_blocks(const model::ModuleTree& tree) {
  RepeatedBlocks out;
  search(tree, model::ModuleTree::root, out);
  return out;
}

std::vector<int> repeated_block_units(const model::ModuleTree& tree) {
  std::vector<int> units{model::ModuleTree::root};
  const auto found = find_repeated_blocks(tree);
  units.insert(units.end(), found.blocks.begin(), found.blocks.end());
  return units;
}

std::string repeated_blocks_spec(const model::ModuleTree& tree) {
  const auto found = find_repeated_blocks(tree);
  // The empty alternative matches the root ("" is its path).
  std::string alternatives;
  for (int c : found.containers) {
    const std::string& path = tree.module(c).path;
    if (!alternatives.empty()) alternatives += '|';
    alternatives += path.empty() ? "[0-9]+" : quote_regex(path) + "\\.[0-9]+";
  }
  return alternatives.empty() ? std::string("paths:") : "paths:(?:" + alternatives + ")?";
}

std::string repeated_blocks_description(const model::ModuleTree& tree) {
  const auto found = find_repeated_blocks(tree);
  if (found.containers.empty()) return "root alone (no repeated blocks)";
  std::string s = "root";
  for (int c : found.containers) {
    const auto& m = tree.module(c);
    s += fmt::format(" + {} x {} ({}N)", m.children.size(), tree.module(m.children.front()).type,
                     m.path.empty() ? std::string() : m.path + ".");
  }
  return s;
}

}  // namespace dmuon::boundary
