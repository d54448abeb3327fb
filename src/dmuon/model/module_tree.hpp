#pragma once
// The module tree of a model: what DMuon sees of a PyTorch nn.Module hierarchy.
//
// Modules have a dotted path ("" for the root), a type name and children in registration
// order; parameters (name, shape, dtype) hang off the module that holds them as its own
// attribute. A parameter object may have several names (holders); its canonical name is the
// first one in module pre-order, as in `named_parameters()` with duplicates removed. It is
// *tied* (PyTorch weight tying) only when its holders are distinct modules: one module holding
// the same object under two attribute names (an alias) still has one parent.
//
// Sizes are validated when a parameter is added: every element and byte count the suite forms
// from one parameter fits in int64, and finalize() checks the same for the whole model (at 4
// bytes per element, the widest any count uses), so sums over any subset cannot overflow.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace dmuon::model {

enum class DType { f32, bf16, f16 };

/// "float32" / "bfloat16" / "float16".
const char* dtype_name(DType t);
/// Parses the names above (and "fp32", "bf16", "fp16"); throws InputError otherwise.
DType parse_dtype(std::string_view s);
/// Bytes per element.
int dtype_size(DType t);

/// One holder of a parameter: module index and the attribute name inside it.
struct Holder {
  int module = -1;
  std::string attr;
};

struct Parameter {
  std::string name;  ///< canonical FQN (first holder in pre-order), set by finalize()
  std::vector<std::int64_t> shape;
  DType dtype = DType::f32;
  std::vector<Holder> holders;  ///< first entry is the canonical holder after finalize()

  int ndim() const { return static_cast<int>(shape.size()); }
  /// Product of the shape (1 for a 0-d parameter, 0 when a dimension is 0); never clamped.
  /// Throws InputError naming the parameter when the product overflows int64.
  std::int64_t numel() const;
  /// numel() * dtype_size(dtype), checked like numel().
  std::int64_t bytes() const;
  /// Held by two or more distinct modules (weight tying, SPEC §3 rule 1).
  bool tied() const;
  /// Has more than one name (tied, or an attribute alias inside one module).
  bool aliased() const { return holders.size() > 1; }
};

/// Largest bytes per element any count uses (an fp32 master copy): the unit of the size
/// checks above.
inline constexpr std::int64_t kMaxBytesPerElement = 4;

struct Module {
  std::string path;           ///< dotted FQN, "" for the root
  std::string name;           ///< last path segment, "" for the root
  std::string type;           ///< class name, e.g. "DecoderLayer", "ModuleList", "Linear"
  int parent = -1;            ///< -1 for the root
  std::vector<int> children;  ///< in registration order
  std::vector<int> params;    ///< parameter ids held directly, attribute order
  /// A container of routed experts: the experts each token is routed to (the geometry's
  /// top-k, geometry.hpp); 0 = not known (the engine then routes min(2, experts)).
  int routed_top_k = 0;
  /// A container of routed experts under expert parallelism (expert_local_tree.hpp): its
  /// children are one EP rank's 1/ep_size of the model's experts; 1 = all of them.
  int ep_size = 1;
};

/// A model's module hierarchy. Build with add_module / add_parameter / tie_parameter, then
/// call finalize(); the query functions require a finalized tree.
class ModuleTree {
 public:
  explicit ModuleTree(std::string root_type);

  static constexpr int root = 0;

  /// Adds a child `name` of `parent`; returns its index. Throws InputError on a duplicate or
  /// dotted name.
  int add_module(int parent, const std::string& name, const std::string& type);
  /// Adds a parameter held by `module` under attribute `attr`; returns its id. A negative
  /// dimension, or a shape whose element count times 4 bytes overflows int64, is an InputError
  /// naming the parameter.
  int add_parameter(int module, const std::string& attr, std::vector<std::int64_t> shape,
                    DType dtype = DType::f32);
  /// Makes `module` also hold the existing parameter `param` under `attr` (weight tying when
  /// `module` is not yet a holder, an attribute alias when it is).
  void tie_parameter(int module, const std::string& attr, int param);
  /// Convenience: a bias-free Linear(in -> out) child with a `weight` of shape (out, in).
  int add_linear(int parent, const std::string& name, std::int64_t in, std::int64_t out,
                 DType dtype = DType::f32);
  /// Convenience: a norm child (`type`, e.g. "LayerNorm", "RMSNorm") with a 1-D `weight`.
  int add_norm(int parent, const std::string& name, const std::string& type, std::int64_t dim,
               DType dtype = DType::f32);

  /// Computes pre-order, canonical parameter names and the path index. Idempotent. Throws
  /// InputError naming the parameter at which the model's total size (4 bytes per element)
  /// overflows int64.
  void finalize();
  bool finalized() const { return finalized_; }

  std::size_t num_modules() const { return modules_.size(); }
  std::size_t num_parameters() const { return params_.size(); }
  const Module& module(int i) const { return modules_.at(static_cast<std::size_t>(i)); }
  const Parameter& parameter(int i) const { return params_.at(static_cast<std::size_t>(i)); }
  const std::vector<Module>& modules() const { return modules_; }
  const std::vector<Parameter>& parameters() const { return params_; }

  /// Module indices in registration pre-order (root first), i.e. `named_modules()` order.
  const std::vector<int>& preorder() const;
  /// Position of module i in preorder().
  int preorder_index(int module) const;
  /// Parameter ids in `named_parameters()` order (tied parameters once, at their first name).
  const std::vector<int>& parameter_order() const;
  /// Module with this dotted path ("" is the root), if any.
  std::optional<int> find_module(std::string_view path) const;
  /// Parameter with this canonical name, if any.
  std::optional<int> find_parameter(std::string_view name) const;
  /// Full name of a holder: "<module path>.<attr>" (or just attr at the root).
  std::string holder_name(const Holder& h) const;
  /// Sum of numel over all parameters (tied counted once); fits in int64 after finalize().
  std::int64_t total_numel() const;
  /// Replaces parameter `param`'s shape by one with the same number of dimensions and no more
  /// elements (a tensor-parallel rank's local shard, plan/tp_volume.hpp); names, holders and
  /// order stay. Throws InputError otherwise.
  void reshape_parameter(int param, std::vector<std::int64_t> shape);
  /// Sets module `module`'s Module::routed_top_k (k >= 1; InputError otherwise).
  void set_routed_top_k(int module, int k);
  /// Sets module `module`'s Module::ep_size (>= 1; InputError otherwise).
  void set_ep_size(int module, int ep);

 private:
  void require_finalized() const;
  std::vector<Module> modules_;
  std::vector<Parameter> params_;
  std::vector<int> preorder_;
  std::vector<int> preorder_index_;
  std::vector<int> param_order_;
  std::unordered_map<std::string, int> module_by_path_;  ///< kept up to date while building
  std::unordered_map<std::string, int> holder_names_;    ///< every "<module>.<attr>" -> param
  std::unordered_map<std::string, int> param_by_name_;
  bool finalized_ = false;
};

/// Joins a parent path and a child name with '.' (no leading dot at the root).
std::string join_path(std::string_view parent, std::string_view name);

}  // namespace dmuon::model
