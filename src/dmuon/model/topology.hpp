#pragma once
// Built-in model topologies: the module trees of the model families the suite benchmarks
// (flat Sequential, VLA, MoE, nested Qwen2-VL policy, Llama, HF-style MoE LLMs), each with
// named presets and integer dimensions overridable by `--set KEY=VALUE`. A Topology bundles
// the tree with the dedicated-parameter rule and the hook-boundary policies that the seed
// note recommends (and a deliberately incomplete one, to exercise strict/lenient handling).
//
// Rule and boundary strings are opaque here; their grammar belongs to the boundary module:
// "ndim=2", "contains:proj", "excludes:router", joined by '&'; "default" (layer-key
// heuristic), "types:A,B" (module-type predicate); "" means none.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dmuon/model/geometry.hpp"
#include "dmuon/model/module_tree.hpp"

namespace dmuon::model {

struct Topology {
  std::string name;                  ///< built-in name ("vla") or the file's "name"
  std::string preset;                ///< preset the dimensions came from; "" for files without one
  ModuleTree tree{"Module"};         ///< finalized
  std::string dedicate_rule;         ///< which parameters are dedicated (SPEC §4)
  std::string recommended_boundary;  ///< hook-boundary policy the seed recommends
  std::string incomplete_boundary;   ///< a policy that misses some parameters; "" if none
  /// Resolved dimension values in TopologyInfo::keys order (aliases excluded).
  std::vector<std::pair<std::string, std::int64_t>> dims;
  /// Heads, head widths, norms, routing, token streams (geometry.hpp); every built-in has one,
  /// a topology file only when it carries the optional "geometry" object. Without it the step
  /// has parameter work only (docs/STEP-WORK.md).
  std::optional<ModelGeometry> geometry;

  /// Value of dimension `key`; throws InputError naming the valid keys when absent.
  std::int64_t dim(const std::string& key) const;
};

/// One dimension accepted by `--set`.
struct DimKey {
  std::string name;
  std::string description;
  std::int64_t min = 1;  ///< smallest accepted value (0 for switches and optional counts)
  std::int64_t max = std::int64_t{1} << 31;  ///< largest accepted value (1 for switches)
};

struct TopologyInfo {
  std::string name;
  std::string description;
  std::string root_type;
  std::vector<std::string> presets;
  std::string default_preset;  ///< "tiny" for every built-in
  /// Dimension keys accepted by --set, in the order Topology::dims reports them; the alias
  /// `layers` (see layers_alias) is accepted too but not listed here.
  std::vector<std::string> keys;
  std::vector<DimKey> key_info;  ///< same order as keys, with ranges and descriptions
  std::string layers_alias;      ///< the key `layers` stands for ("" when not accepted)
};

/// The built-in topologies, in a fixed order: sequential, vla, moe, nested, llm, moe-llm.
const std::vector<TopologyInfo>& builtin_topologies();

/// Info of one built-in; throws InputError listing the valid names.
const TopologyInfo& topology_info(const std::string& name);

/// Builds a built-in topology from `preset` with `--set` overrides applied in order (a later
/// override of the same key wins). Unknown topology/preset/key, a non-integer value or one
/// outside the key's range, or dimensions that form no geometry (a width not a multiple of
/// head_dim) -> InputError (one line, naming the bad value and the valid ones). The returned
/// tree is finalized and the geometry validated against it.
Topology build_topology(const std::string& name, const std::string& preset = "tiny",
                        const std::vector<std::pair<std::string, std::string>>& overrides = {});

/// Splits "KEY=VALUE" as given to --set; throws InputError when there is no '=' or no key.
std::pair<std::string, std::string> parse_override(const std::string& arg);

}  // namespace dmuon::model
