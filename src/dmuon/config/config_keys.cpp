#include "dmuon/config/config_keys.hpp"

namespace dmuon::config {

std::string ConfigKey::flag() const {
  std::string f = "--" + name;
  for (char& c : f)
    if (c == '_') c = '-';
  return f;
}

std::string key_names(const std::vector<ConfigKey>& keys) {
  std::string s;
  for (const auto& k : keys) s += (s.empty() ? "" : ", ") + k.name;
  return s;
}

}  // namespace dmuon::config
