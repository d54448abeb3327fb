#pragma once
// The one list of configuration keys dmuon_bench accepts in a --config YAML file. A key
// mirrors a command-line flag: "--" + the key with '_' replaced by '-' (owner_strategy ->
// --owner-strategy). Shared by the bench app (which registers the flags) and the config
// tests (which check every shipped config uses only these keys).

#include <string>
#include <vector>

namespace dmuon::config {

enum class KeyKind {
  scalar,  ///< one value: `key: value`
  flag,    ///< a boolean switch: `key: true` passes `--key`, `false` passes nothing
  list,    ///< one value or a YAML sequence; each item becomes one `--key=item` (sweeps, --set)
};

struct ConfigKey {
  std::string name;  ///< snake_case key
  KeyKind kind = KeyKind::scalar;
  std::string help;
  /// The flag this key stands for ("--" + name with '_' -> '-').
  std::string flag() const;
};

/// dmuon_bench's keys, in documentation order.
const std::vector<ConfigKey>& bench_config_keys();

/// Names of `keys`, comma-separated (for error messages).
std::string key_names(const std::vector<ConfigKey>& keys);

}  // namespace dmuon::config
