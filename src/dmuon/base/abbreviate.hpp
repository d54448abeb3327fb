#pragma once
// Values quoted in one-line error messages are cut to a readable length: a 40,000-character
// regex or path must not become a 40,000-character error line.

#include <string>
#include <string_view>

namespace dmuon {

/// `s` itself when at most `keep` characters; else its first `keep` characters, "...", and
/// the full length.
inline std::string abbreviate_value(std::string_view s, std::size_t keep = 80) {
  if (s.size() <= keep) return std::string(s);
  return std::string(s.substr(0, keep)) + "... (" + std::to_string(s.size()) + " characters)";
}

}  // namespace dmuon
