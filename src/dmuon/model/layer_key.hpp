#pragma once
// The reference heuristic's layer key (SPEC §2): the first `layers`/`blocks` segment that has a
// following segment, e.g. "model.layers.3.mlp.gate_proj.weight" -> "model.layers.3".

#include <optional>
#include <string>
#include <string_view>

namespace dmuon::model {

/// "<prefix>.<layers|blocks>.<next>" with prefix "_root" when empty; nullopt when no match.
std::optional<std::string> layer_key(std::string_view name);

/// The module path the key denotes: the key with a leading "_root." removed.
std::string layer_key_path(std::string_view key);

}  // namespace dmuon::model
