// Regex for builds without RE2: the standalone GPU check (tests/device), built on a machine
// without a package registry, compiles the planning library with this file instead of
// regex.cpp. Same declaration, so callers need no #ifdef; a user regex is refused with one
// line (built-in topologies and their boundaries use none).

#include <fmt/format.h>

#include "dmuon/base/error.hpp"
#include "dmuon/boundary/regex.hpp"

namespace dmuon::boundary {

Regex::Regex(std::string_view pattern, std::string_view context) : pattern_(pattern) {
  throw InputError(fmt::format(
      "{}: regular expressions are not available in this build (built without RE2)", context));
}

bool Regex::full_match(std::string_view) const {
  return false;  // never reached: no Regex can be constructed
}

}  // namespace dmuon::boundary
