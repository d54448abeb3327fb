#pragma once
// Values quoted in one-line error messages are cut to a readable length (a 40,000-character
// regex or path must not become a 40,000-character error line) and made printable.

#include <algorithm>
#include <string>
#include <string_view>

namespace dmuon {

/// `s` when at most `keep` characters; else its first `keep` characters, "...", and the full
/// length. Control characters are escaped ("\n", "\t", "\x00"): a name read from a file may
/// hold a NUL (which would end the printed line early) or a line break, and the line quoting
/// it must stay one printable line.
inline std::string abbreviate_value(std::string_view s, std::size_t keep = 80) {
  std::string out;
  for (const char c : s.substr(0, std::min(s.size(), keep))) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  if (s.size() > keep) out += "... (" + std::to_string(s.size()) + " characters)";
  return out;
}

}  // namespace dmuon
