#include "dmuon/config/config_origin.hpp"

#include <fmt/format.h>

#include <cctype>
#include <map>
#include <utility>

namespace dmuon::config {
namespace {

struct ConfigOrigins {
  std::string path;
  std::map<std::string, std::string> where;                 // "--steps" -> "FILE:LINE, key 'steps'"
  std::vector<std::pair<std::string, std::string>> values;  // "'zzz'" -> where it came from
};

ConfigOrigins& origins() {
  static ConfigOrigins o;
  return o;
}

}  // namespace

void forget_config_origins() {
  origins() = ConfigOrigins{};
}

void note_config_origin(const std::string& path, const std::string& flag, int line,
                        const std::string& key, const std::vector<std::string>& values) {
  auto& o = origins();
  o.path = path;
  const auto where = fmt::format("{}:{}, key '{}'", path, line, key);
  o.where[flag] = where;
  // Only values that say something of their own: a quoted "2" in a message may be any flag's.
  for (const auto& v : values)
    if (v.size() >= 2 && v.find_first_not_of("0123456789.-+eE") != std::string::npos)
      o.values.emplace_back("'" + v + "'", where);
}

std::string config_origin_note(const std::string& message) {
  const auto& o = origins();
  if (o.where.empty() || message.find(o.path) != std::string::npos) return "";
  for (std::size_t at = message.find("--"); at != std::string::npos;
       at = message.find("--", at + 2)) {
    std::size_t end = at + 2;
    while (end < message.size() && (std::isalnum(static_cast<unsigned char>(message[end])) ||
                                    message[end] == '-' || message[end] == '_'))
      ++end;
    const auto it = o.where.find(message.substr(at, end - at));
    if (it != o.where.end()) return " (config " + it->second + ")";
  }
  // A message that quotes the bad value without naming the flag ("unknown owner strategy
  // 'zzz'").
  for (const auto& [quoted, where] : o.values)
    if (message.find(quoted) != std::string::npos) return " (config " + where + ")";
  return "";
}

}  // namespace dmuon::config
