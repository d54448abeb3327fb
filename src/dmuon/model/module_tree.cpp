#include "dmuon/model/module_tree.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "dmuon/base/checked_int.hpp"
#include "dmuon/base/error.hpp"

namespace dmuon::model {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::bf16: return "bfloat16";
    case DType::f16: return "float16";
  }
  return "?";
}

DType parse_dtype(std::string_view s) {
  if (s == "float32" || s == "fp32" || s == "f32") return DType::f32;
  if (s == "bfloat16" || s == "bf16") return DType::bf16;
  if (s == "float16" || s == "fp16" || s == "f16") return DType::f16;
  throw InputError(fmt::format("unknown dtype '{}' (valid: float32, bfloat16, float16)", s));
}

int dtype_size(DType t) {
  return t == DType::f32 ? 4 : 2;
}

namespace {

// Element count of `shape`, or nullopt when it overflows int64 (dimensions are >= 0).
std::optional<std::int64_t> shape_numel(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto d : shape)
    if (__builtin_mul_overflow(n, d, &n)) return std::nullopt;
  return n;
}

std::string overflow_message(const std::string& name, const std::vector<std::int64_t>& shape) {
  return fmt::format(
      "parameter '{}' shape [{}] is too large: its element count times {} bytes overflows 64 "
      "bits",
      name, fmt::join(shape, ", "), kMaxBytesPerElement);
}

}  // namespace

std::int64_t Parameter::numel() const {
  const auto n = shape_numel(shape);
  if (!n) throw InputError(overflow_message(name, shape));
  return *n;
}

std::int64_t Parameter::bytes() const {
  return checked_mul(numel(), dtype_size(dtype), [&] { return overflow_message(name, shape); });
}

bool Parameter::tied() const {
  for (const auto& h : holders)
    if (h.module != holders.front().module) return true;
  return false;
}

std::string join_path(std::string_view parent, std::string_view name) {
  if (parent.empty()) return std::string(name);
  std::string s;
  s.reserve(parent.size() + 1 + name.size());
  s.append(parent).append(".").append(name);
  return s;
}

ModuleTree::ModuleTree(std::string root_type) {
  Module r;
  r.type = std::move(root_type);
  modules_.push_back(std::move(r));
  module_by_path_.emplace("", root);
}

int ModuleTree::add_module(int parent, const std::string& name, const std::string& type) {
  if (parent < 0 || static_cast<std::size_t>(parent) >= modules_.size())
    throw InputError(fmt::format("module parent index {} out of range", parent));
  if (name.empty() || name.find('.') != std::string::npos)
    throw InputError(fmt::format("module name '{}' under '{}' must be non-empty and dot-free", name,
                                 modules_[parent].path));
  // Hash lookups, not child scans: containers with thousands of entries stay linear.
  std::string path = join_path(modules_[parent].path, name);
  if (module_by_path_.count(path)) throw InputError(fmt::format("duplicate module '{}'", path));
  if (holder_names_.count(path))
    throw InputError(fmt::format("module '{}' clashes with a parameter of the same name", path));
  Module m;
  m.path = std::move(path);
  m.name = name;
  m.type = type;
  m.parent = parent;
  modules_.push_back(std::move(m));
  const int id = static_cast<int>(modules_.size()) - 1;
  module_by_path_.emplace(modules_.back().path, id);
  modules_[parent].children.push_back(id);
  finalized_ = false;
  return id;
}

int ModuleTree::add_parameter(int module, const std::string& attr, std::vector<std::int64_t> shape,
                              DType dtype) {
  if (module < 0 || static_cast<std::size_t>(module) >= modules_.size())
    throw InputError(fmt::format("parameter holder index {} out of range", module));
  for (auto d : shape)
    if (d < 0)
      throw InputError(fmt::format("parameter '{}' has a negative dimension {}",
                                   join_path(modules_[module].path, attr), d));
  const auto numel = shape_numel(shape);
  std::int64_t widest = 0;
  if (!numel || __builtin_mul_overflow(*numel, kMaxBytesPerElement, &widest))
    throw InputError(overflow_message(join_path(modules_[module].path, attr), shape));
  Parameter p;
  p.shape = std::move(shape);
  p.dtype = dtype;
  params_.push_back(std::move(p));
  const int id = static_cast<int>(params_.size()) - 1;
  tie_parameter(module, attr, id);
  return id;
}

void ModuleTree::tie_parameter(int module, const std::string& attr, int param) {
  if (module < 0 || static_cast<std::size_t>(module) >= modules_.size())
    throw InputError(fmt::format("parameter holder index {} out of range", module));
  if (param < 0 || static_cast<std::size_t>(param) >= params_.size())
    throw InputError(fmt::format("parameter index {} out of range", param));
  if (attr.empty() || attr.find('.') != std::string::npos)
    throw InputError(fmt::format("parameter name '{}' under '{}' must be non-empty and dot-free",
                                 attr, modules_[module].path));
  std::string full = join_path(modules_[module].path, attr);
  if (holder_names_.count(full)) throw InputError(fmt::format("duplicate parameter '{}'", full));
  if (module_by_path_.count(full))
    throw InputError(fmt::format("parameter '{}' clashes with a submodule of the same name", full));
  holder_names_.emplace(std::move(full), param);
  params_[param].holders.push_back({module, attr});
  modules_[module].params.push_back(param);
  finalized_ = false;
}

int ModuleTree::add_linear(int parent, const std::string& name, std::int64_t in, std::int64_t out,
                           DType dtype) {
  const int m = add_module(parent, name, "Linear");
  add_parameter(m, "weight", {out, in}, dtype);
  return m;
}

int ModuleTree::add_norm(int parent, const std::string& name, const std::string& type,
                         std::int64_t dim, DType dtype) {
  const int m = add_module(parent, name, type);
  add_parameter(m, "weight", {dim}, dtype);
  return m;
}

void ModuleTree::finalize() {
  if (finalized_) return;
  preorder_.clear();
  preorder_.reserve(modules_.size());
  std::vector<int> stack{root};
  while (!stack.empty()) {
    const int m = stack.back();
    stack.pop_back();
    preorder_.push_back(m);
    const auto& ch = modules_[m].children;
    for (auto it = ch.rbegin(); it != ch.rend(); ++it) stack.push_back(*it);
  }
  preorder_index_.assign(modules_.size(), -1);
  for (std::size_t i = 0; i < preorder_.size(); ++i)
    preorder_index_[preorder_[i]] = static_cast<int>(i);

  // Canonical holder = first in (pre-order, attribute order), as named_parameters() yields.
  param_order_.clear();
  std::vector<char> seen(params_.size(), 0);
  for (int m : preorder_) {
    for (int p : modules_[m].params) {
      if (seen[p]) continue;
      seen[p] = 1;
      param_order_.push_back(p);
      auto& hs = params_[p].holders;
      auto first =
          std::find_if(hs.begin(), hs.end(), [&](const Holder& h) { return h.module == m; });
      std::rotate(hs.begin(), first, first + 1);
      params_[p].name = holder_name(hs.front());
    }
  }
  // Bounds every later sum of element or byte counts over any subset of the parameters.
  std::int64_t total_bytes = 0;
  for (int p : param_order_)
    total_bytes = checked_add(total_bytes, kMaxBytesPerElement * params_[p].numel(), [&] {
      return fmt::format(
          "the model is too large: at parameter '{}' its total element count times {} bytes "
          "overflows 64 bits",
          params_[p].name, kMaxBytesPerElement);
    });
  param_by_name_.clear();
  param_by_name_.reserve(params_.size());
  for (std::size_t i = 0; i < params_.size(); ++i)
    param_by_name_.emplace(params_[i].name, static_cast<int>(i));
  finalized_ = true;
}

void ModuleTree::require_finalized() const {
  if (!finalized_) throw std::logic_error("ModuleTree used before finalize()");
}

const std::vector<int>& ModuleTree::preorder() const {
  require_finalized();
  return preorder_;
}

int ModuleTree::preorder_index(int module) const {
  require_finalized();
  return preorder_index_.at(static_cast<std::size_t>(module));
}

const std::vector<int>& ModuleTree::parameter_order() const {
  require_finalized();
  return param_order_;
}

std::optional<int> ModuleTree::find_module(std::string_view path) const {
  require_finalized();
  auto it = module_by_path_.find(std::string(path));
  if (it == module_by_path_.end()) return std::nullopt;
  return it->second;
}

std::optional<int> ModuleTree::find_parameter(std::string_view name) const {
  require_finalized();
  auto it = param_by_name_.find(std::string(name));
  if (it == param_by_name_.end()) return std::nullopt;
  return it->second;
}

std::string ModuleTree::holder_name(const Holder& h) const {
  return join_path(modules_.at(static_cast<std::size_t>(h.module)).path, h.attr);
}

void ModuleTree::reshape_parameter(int param, std::vector<std::int64_t> shape) {
  auto& p = params_.at(static_cast<std::size_t>(param));
  Parameter local = p;
  local.shape = std::move(shape);
  bool ok = local.shape.size() == p.shape.size();
  for (auto d : local.shape) ok = ok && d >= 0;
  if (!ok || local.numel() > p.numel())
    throw InputError("parameter '" + p.name + "': a reshape keeps the dimensions and never grows");
  p.shape = std::move(local.shape);
}

void ModuleTree::set_routed_top_k(int module, int k) {
  auto& m = modules_.at(static_cast<std::size_t>(module));
  if (k < 1)
    throw InputError("module '" + m.path + "': routed top-k " + std::to_string(k) +
                     " is invalid (must be >= 1)");
  m.routed_top_k = k;
}

void ModuleTree::set_ep_size(int module, int ep) {
  auto& m = modules_.at(static_cast<std::size_t>(module));
  if (ep < 1)
    throw InputError("module '" + m.path + "': expert-parallel size " + std::to_string(ep) +
                     " is invalid (must be >= 1)");
  m.ep_size = ep;
}

std::int64_t ModuleTree::total_numel() const {
  std::int64_t n = 0;
  for (const auto& p : params_) n += p.numel();
  return n;
}

}  // namespace dmuon::model
