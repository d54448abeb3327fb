#pragma once
// The one regular-expression type for user patterns (boundary paths:/resolver:, dedication
// regex:): RE2, whose matching time is linear in the subject for every pattern, so no pattern
// (e.g. `(\w+\.?)+experts\.\d+`) can hang a run, and whose parser keeps no recursion on the
// call stack. Syntax is RE2's (Perl-like; no backreferences or lookaround). Patterns longer
// than kMaxRegexLength characters, or whose compiled program exceeds RE2's memory budget, are
// rejected at parse time.

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace re2 {
class RE2;
}

namespace dmuon::boundary {

/// Longest accepted pattern, in bytes.
inline constexpr std::size_t kMaxRegexLength = 4096;

class Regex {
 public:
  /// Compiles `pattern`. `context` prefixes every error ("boundary 'paths:...'"). Throws
  /// InputError naming the (abbreviated) pattern and RE2's reason, or the length limit.
  Regex(std::string_view pattern, std::string_view context);

  /// True when the whole of `text` matches.
  bool full_match(std::string_view text) const;
  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  std::shared_ptr<const re2::RE2> re_;  ///< shared: a policy is copied into every plan
};

}  // namespace dmuon::boundary
