#include "dmuon/config/config_file.hpp"
#include "dmuon/config/config_origin.hpp"

#include <fmt/format.h>
// yaml-cpp's node headers trip GCC 12's -Wdangling-pointer (a false positive in its
// inline code); silence it for those headers only.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdangling-pointer"
#include <yaml-cpp/yaml.h>
#pragma GCC diagnostic pop
#else
#include <yaml-cpp/yaml.h>
#endif

#include <algorithm>
#include <fstream>
#include <set>

#include "dmuon/base/error.hpp"
#include "dmuon/base/input_file.hpp"

namespace dmuon::config {
namespace {

[[noreturn]] void fail_at(const std::string& path, const YAML::Node& node,
                          const std::string& what) {
  throw InputError(fmt::format("{}:{}: {}", path, node.Mark().line + 1, what));
}

std::string scalar_value(const std::string& path, const std::string& key, const YAML::Node& v) {
  if (!v.IsScalar()) fail_at(path, v, fmt::format("config key '{}' needs a single value", key));
  return v.Scalar();
}

std::string boundary_value(const std::string& path, const YAML::Node& v) {
  if (v.IsScalar()) return v.Scalar();
  if (!v.IsMap())
    fail_at(path, v, "a boundary item is a string or a mapping {spec: S, strict: true|false}");
  std::optional<std::string> spec;
  std::optional<bool> strict;
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string k = it->first.as<std::string>();
    if (k == "spec") {
      spec = scalar_value(path, "boundary.spec", it->second);
    } else if (k == "strict") {
      bool b = false;
      if (!it->second.IsScalar() || !YAML::convert<bool>::decode(it->second, b))
        fail_at(path, it->second, "boundary 'strict' must be true or false");
      strict = b;
    } else {
      fail_at(path, it->first,
              fmt::format("unknown boundary item key '{}' (valid keys: spec, strict)", k));
    }
  }
  if (!spec) fail_at(path, v, "boundary item has no 'spec'");
  if (!strict) return *spec;
  return (*strict ? "strict:" : "lenient:") + *spec;
}

const ConfigKey* find_key(const std::vector<ConfigKey>& keys, const std::string& name) {
  for (const auto& k : keys)
    if (k.name == name) return &k;
  return nullptr;
}

}  // namespace

const ConfigEntry* ConfigValues::find(const std::string& key) const {
  for (const auto& e : entries)
    if (e.key == key) return &e;
  return nullptr;
}

ConfigValues load_config(const std::string& path, const std::vector<ConfigKey>& valid_keys) {
  // A regular file of at most 1 MiB, UTF-8 text (a FIFO would block, a UTF-16 file would
  // parse as garbage keys).
  const std::string text = read_regular_file(path, "config file", std::int64_t{1} << 20);
  if (text.find('\0') != std::string::npos)
    throw InputError(fmt::format(
        "config file '{}' is not UTF-8 text (it holds NUL bytes: UTF-16?); save it as UTF-8",
        path));
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw InputError(fmt::format("{}:{}:{}: YAML syntax error: {}", path, e.mark.line + 1,
                                 e.mark.column + 1, e.msg));
  }
  ConfigValues out;
  out.path = path;
  if (root.IsNull()) return out;  // an empty file configures nothing
  if (!root.IsMap()) fail_at(path, root, "a config file is a mapping of keys to values");
  std::set<std::string> seen;
  for (auto it = root.begin(); it != root.end(); ++it) {
    // Copies, not references: yaml-cpp's iterator returns a temporary proxy (ASan:
    // stack-use-after-scope when bound by reference). Nodes are cheap handles.
    const YAML::Node kn = it->first;
    const YAML::Node v = it->second;
    if (!kn.IsScalar()) fail_at(path, kn, "config keys are plain names");
    const std::string name = kn.Scalar();
    const ConfigKey* key = find_key(valid_keys, name);
    if (key == nullptr)
      fail_at(path, kn,
              fmt::format("unknown config key '{}' (valid keys: {})", name, key_names(valid_keys)));
    if (!seen.insert(name).second)
      fail_at(path, kn, fmt::format("duplicate config key '{}'", name));
    ConfigEntry e;
    e.key = name;
    e.line = kn.Mark().line + 1;
    if (v.IsNull() || !v.IsDefined())
      fail_at(path, kn, fmt::format("config key '{}' has no value", name));
    switch (key->kind) {
      case KeyKind::scalar: e.values.push_back(scalar_value(path, name, v)); break;
      case KeyKind::flag: {
        bool b = false;
        if (!v.IsScalar() || !YAML::convert<bool>::decode(v, b))
          fail_at(path, v, fmt::format("config key '{}' must be true or false", name));
        e.values.push_back(b ? "true" : "false");
        break;
      }
      case KeyKind::list: {
        const bool boundary = name == "boundary";
        auto item = [&](const YAML::Node& n) {
          return boundary ? boundary_value(path, n) : scalar_value(path, name, n);
        };
        if (v.IsSequence()) {
          if (v.size() == 0)
            fail_at(path, v, fmt::format("config key '{}' has an empty list", name));
          for (const auto& n : v) e.values.push_back(item(n));
        } else {
          e.values.push_back(item(v));
        }
        break;
      }
    }
    out.entries.push_back(std::move(e));
  }
  return out;
}

std::vector<std::string> config_to_args(const ConfigValues& config,
                                        const std::vector<ConfigKey>& valid_keys,
                                        const std::vector<std::string>& skip_flags) {
  std::vector<std::string> args;
  for (const auto& e : config.entries) {
    const ConfigKey* key = find_key(valid_keys, e.key);
    if (key == nullptr)
      throw InputError(fmt::format("{}:{}: unknown config key '{}' (valid keys: {})", config.path,
                                   e.line, e.key, key_names(valid_keys)));
    const std::string flag = key->flag();
    if (std::find(skip_flags.begin(), skip_flags.end(), flag) != skip_flags.end()) continue;
    if (key->kind == KeyKind::flag) {
      if (!e.values.empty() && e.values.front() == "true") args.push_back(flag);
      continue;
    }
    for (const auto& v : e.values) args.push_back(flag + "=" + v);
  }
  return args;
}

namespace {

// Remembers, for config_origin_note, where each flag the config contributes comes from.
void record_origins(const ConfigValues& config, const std::vector<ConfigKey>& valid_keys,
                    const std::vector<std::string>& skip_flags) {
  for (const auto& e : config.entries) {
    const ConfigKey* key = find_key(valid_keys, e.key);
    if (key == nullptr) continue;
    const std::string flag = key->flag();
    if (std::find(skip_flags.begin(), skip_flags.end(), flag) != skip_flags.end()) continue;
    note_config_origin(config.path, flag, e.line, e.key, e.values);
  }
}

}  // namespace

ExpandedArgs::ExpandedArgs(int argc, char** argv, const std::vector<ConfigKey>& valid_keys) {
  forget_config_origins();
  std::vector<std::string> rest;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    std::string value;
    if (a == "--config") {
      if (i + 1 >= argc) throw InputError("--config needs a file name");
      value = argv[++i];
    } else if (a.rfind("--config=", 0) == 0) {
      value = a.substr(9);
    } else {
      rest.push_back(a);
      continue;
    }
    if (!config_path_.empty()) throw InputError("--config given more than once");
    if (value.empty()) throw InputError("--config needs a file name");
    config_path_ = value;
  }
  args_.push_back(argc > 0 ? argv[0] : "app");
  if (!config_path_.empty()) {
    std::vector<std::string> on_command_line;
    for (const auto& a : rest) {
      if (a == "--") break;
      if (a.rfind("--", 0) == 0) {
        const std::string flag = a.substr(0, a.find('='));
        if (flag != "--set") on_command_line.push_back(flag);
      }
    }
    const auto config = load_config(config_path_, valid_keys);
    for (auto& a : config_to_args(config, valid_keys, on_command_line)) args_.push_back(a);
    record_origins(config, valid_keys, on_command_line);
  }
  for (auto& a : rest) args_.push_back(a);
  for (auto& a : args_) ptrs_.push_back(a.data());
  ptrs_.push_back(nullptr);
}

BoundaryItem parse_boundary_item(const std::string& item) {
  if (item.rfind("strict:", 0) == 0) return {item.substr(7), true};
  if (item.rfind("lenient:", 0) == 0) return {item.substr(8), false};
  return {item, std::nullopt};
}

}  // namespace dmuon::config
