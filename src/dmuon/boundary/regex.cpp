#include "dmuon/boundary/regex.hpp"

#include <fmt/format.h>
#include <re2/re2.h>

#include "dmuon/base/abbreviate.hpp"
#include "dmuon/base/error.hpp"

namespace dmuon::boundary {

Regex::Regex(std::string_view pattern, std::string_view context) : pattern_(pattern) {
  if (pattern.size() > kMaxRegexLength)
    throw InputError(fmt::format("{}: regex '{}' is longer than {} characters", context,
                                 abbreviate_value(pattern, 40), kMaxRegexLength));
  RE2::Options options;
  options.set_log_errors(false);  // the error goes into our one-line message, not stderr
  auto re = std::make_shared<const RE2>(re2::StringPiece(pattern.data(), pattern.size()), options);
  if (!re->ok())
    throw InputError(fmt::format("{}: bad regex '{}': {}", context, abbreviate_value(pattern, 80),
                                 abbreviate_value(re->error(), 120)));
  re_ = std::move(re);
}

bool Regex::full_match(std::string_view text) const {
  return RE2::FullMatch(re2::StringPiece(text.data(), text.size()), *re_);
}

}  // namespace dmuon::boundary
