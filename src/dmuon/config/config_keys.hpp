#pragma once
// A configuration key of a --config YAML file. A key mirrors a command-line flag: "--" + the
// key with '_' replaced by '-' (owner_strategy -> --owner-strategy). The tools' keys come from
// their option table (src/apps/options/run_option_outputs.hpp: config_keys).

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

/// Names of `keys`, comma-separated (for error messages).
std::string key_names(const std::vector<ConfigKey>& keys);

}  // namespace dmuon::config
