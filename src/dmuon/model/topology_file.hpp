#pragma once
// The topology file: a model's module tree as JSON, written by scripts/export_topology.py from
// any PyTorch nn.Module (meta device is enough) and by write_topology_json from a built-in.
//
//   {"format": "dmuon-topology", "version": 1, "name": "vla", "root_type": "ToyVLA",
//    "preset": "tiny", "dims": {"d": 128},                       (optional)
//    "dedicate": "ndim=2", "recommended_boundary": "...",
//    "incomplete_boundary": "...",                               (optional)
//    "geometry": {...},             (optional: heads, norms, routing; geometry_json.hpp)
//    "modules": [{"path": "visual", "type": "VisionTower"}, ...],   root excluded; pre-order,
//                                                                   parents before children
//    "parameters": [{"name": "visual.blocks.0.norm1.weight", "shape": [128],
//                    "dtype": "float32", "tied": ["other.holder.weight"]}, ...]}
//
// A parameter name is "<holder module path>.<attribute>" (just the attribute at the root).
// "tied" lists the other names of the same parameter object (in other modules: weight tying;
// in the same module: an attribute alias, which is not tied); "dtype" defaults to float32;
// unknown keys are errors (typos must not pass silently).
//
// Limits (bad input, not crashes): the file must be a regular file (a FIFO or directory is
// refused before reading) of at most kMaxTopologyFileBytes; JSON nesting deeper than
// kMaxTopologyJsonDepth is refused before the document is built; a type name ("root_type",
// a module's "type") is identifier-like (letters, digits, '_', '.', ':', '<', '>'; at most
// kMaxTypeNameLength characters).

#include <cstdint>
#include <string>
#include <string_view>

#include "dmuon/model/topology.hpp"

namespace dmuon::model {

/// Largest topology file read (a 2-million-module model is about 200 MB of JSON).
inline constexpr std::int64_t kMaxTopologyFileBytes = std::int64_t{1} << 30;
/// Deepest JSON nesting accepted (a valid topology file nests 4 levels).
inline constexpr int kMaxTopologyJsonDepth = 64;
/// Longest module type name accepted (a class name, possibly qualified or templated).
inline constexpr std::size_t kMaxTypeNameLength = 256;

/// Parses a topology document. `source_name` prefixes every error message. Throws InputError:
/// JSON syntax errors as "<source>:<line>:<col>: ...", semantic ones naming the entry, e.g.
/// "<source>: modules[3] 'a.b': parent 'a' is not defined before it".
Topology parse_topology_json(std::string_view text, std::string_view source_name);

/// Reads and parses a file; an unreadable file is an InputError naming the path.
Topology read_topology_file(const std::string& path);

/// Serializes one module / parameter per line (diff- and grep-friendly); the result parses
/// back to an identical topology.
std::string write_topology_json(const Topology& topology);

/// Writes atomically (temporary name in the same directory, then rename).
void write_topology_file(const Topology& topology, const std::string& path);

}  // namespace dmuon::model
