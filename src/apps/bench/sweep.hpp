#pragma once
// The boundary sweep of one invocation: the --boundary items, or (none given) the topology's
// default sweep: the `boundary` list of configs/sweeps/<topology>.yaml (a file holding that
// list alone) when it exists for a built-in topology, else default; recommended, strict;
// incomplete, strict; incomplete, lenient. Default-sweep items a topology lacks (no incomplete
// boundary; recommended equal to the default) are skipped; a command-line item a topology lacks is
// an InputError.

#include <string>
#include <vector>

#include "dmuon/model/topology.hpp"

namespace dmuon::apps::bench {

struct BoundaryChoice {
  std::string word;  ///< as the user wrote it ("recommended", "types:A")
  std::string spec;  ///< resolved ("types:Expert,MoELayer")
  bool strict = true;
  /// "recommended types:Expert,MoELayer", or the spec when word == spec.
  std::string label() const;
  const char* mode() const { return strict ? "strict" : "lenient"; }
};

/// The built-in default sweep items ("default", "strict:recommended", ...).
std::vector<std::string> builtin_sweep_items();

/// The default sweep items for a built-in topology: `config_dir`/sweeps/<topology>.yaml's
/// `boundary` list when the file exists (any other key in it is an InputError naming its
/// line), else builtin_sweep_items(). `source` tells which.
std::vector<std::string> default_sweep_items(const std::string& topology,
                                             const std::string& config_dir, std::string* source);

/// Resolves items (config::parse_boundary_item syntax) against `t`. `lenient` is the mode of
/// items without their own; `skip_missing` drops items the topology lacks (default sweep). An
/// item resolving to a boundary and mode already in the sweep runs once (`*repeated` counts
/// the items dropped).
std::vector<BoundaryChoice> resolve_sweep(const std::vector<std::string>& items, bool lenient,
                                          const model::Topology& t, bool skip_missing,
                                          int* repeated = nullptr);

}  // namespace dmuon::apps::bench
