#pragma once
// YAML configuration files for the apps (--config FILE). A config is a flat mapping of keys
// (see config_keys.hpp) to values; it is turned into flags placed before the real command
// line, so every config key has a flag and the command line overrides the file.
//
// Override rule (documented in configs/README.md): a flag given on the command line replaces
// the config key entirely — except `set`, whose command-line values are appended after the
// file's (a later --set of the same dimension wins).
//
// Boundary items: a plain string is passed as given (its strictness comes from `lenient`); a
// mapping {spec: S, strict: B} is passed as "strict:S" or "lenient:S" — parse_boundary_item()
// splits it again.

#include <optional>
#include <string>
#include <vector>

#include "dmuon/config/config_keys.hpp"

namespace dmuon::config {

struct ConfigEntry {
  std::string key;
  std::vector<std::string> values;  ///< one for scalars and flags ("true"/"false")
  int line = 0;                     ///< 1-based line of the key in the file
};

struct ConfigValues {
  std::string path;
  std::vector<ConfigEntry> entries;  ///< file order
  const ConfigEntry* find(const std::string& key) const;
};

/// Loads `path`. Syntax errors ("FILE:LINE:COL: YAML syntax error: ..."), unknown keys
/// ("FILE:LINE: unknown config key 'k' (valid keys: ...)"), duplicate keys, a list for a
/// scalar key and a non-boolean flag are InputErrors naming the file and line.
ConfigValues load_config(const std::string& path, const std::vector<ConfigKey>& valid_keys);

/// The flags a config stands for, each one token "--flag=value" (or "--flag" for a true
/// switch), in file order. Keys whose flag is in `skip_flags` are left out.
std::vector<std::string> config_to_args(const ConfigValues& config,
                                        const std::vector<ConfigKey>& valid_keys,
                                        const std::vector<std::string>& skip_flags = {});

/// argv with a --config FILE (or --config=FILE) expanded in place: argv[0], then the config's
/// flags (minus those the command line overrides, see the rule above), then the remaining
/// command-line arguments. Without --config, argv unchanged.
class ExpandedArgs {
 public:
  ExpandedArgs(int argc, char** argv, const std::vector<ConfigKey>& valid_keys);
  ExpandedArgs(const ExpandedArgs&) = delete;  // argv() points into args_
  ExpandedArgs& operator=(const ExpandedArgs&) = delete;
  int argc() const { return static_cast<int>(ptrs_.size()) - 1; }
  char** argv() { return ptrs_.data(); }
  const std::vector<std::string>& args() const { return args_; }
  /// The config file given, or "".
  const std::string& config_path() const { return config_path_; }

 private:
  std::vector<std::string> args_;
  std::vector<char*> ptrs_;  ///< args_ pointers + a terminating nullptr
  std::string config_path_;
};

/// A boundary item as passed by a config: "strict:S" / "lenient:S" carry their own strictness,
/// anything else (S) uses the default.
struct BoundaryItem {
  std::string spec;
  std::optional<bool> strict;
};
BoundaryItem parse_boundary_item(const std::string& item);

}  // namespace dmuon::config
