#pragma once
// The reference heuristic's layer key (SPEC §2): the first `layers`/`blocks` segment that has a
// following segment, e.g. "model.layers.3.mlp.gate_proj.weight" -> "model.layers.3".

#include <optional>
#include <string>
#include <string_view>

namespace dmuon::model {

/// "<prefix>.<layers|blocks>.<next>" with prefix "_root" when empty; nullopt when no match.
std::optional<std::string> layer_key(std::string_view name);

/// The module the key denotes, as a path: `path` cut after the segment that follows its first
/// `layers`/`blocks` segment ("model.layers.3.mlp" -> "model.layers.3", "layers.0.fc" ->
/// "layers.0"); nullopt when layer_key(path) is. Paths are never rewritten: a top-level module
/// literally named `_root` keeps its name ("_root.layers.0.fc" -> "_root.layers.0"), although
/// its key string equals the key of the root's own "layers.0".
std::optional<std::string> layer_key_module_path(std::string_view path);

}  // namespace dmuon::model
