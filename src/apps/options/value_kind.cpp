#include "options/value_kind.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "dmuon/base/abbreviate.hpp"
#include "dmuon/base/error.hpp"

namespace dmuon::apps::options {

void invalid_value(const std::string& flag, const std::string& text, const std::string& valid) {
  throw InputError(
      fmt::format("{} '{}' is invalid (valid: {})", flag, abbreviate_value(text, 40), valid));
}

void check_text(const std::string& flag, const std::string& text, const std::string& valid,
                std::size_t max_length) {
  if (text.empty()) throw InputError(fmt::format("{} has an empty value (valid: {})", flag, valid));
  if (text.size() > 1 && text[0] == '-' && text[1] == '-')
    throw InputError(fmt::format("{} '{}' looks like a flag, not a value (valid: {})", flag,
                                 abbreviate_value(text, 40), valid));
  if (text.size() > max_length)
    throw InputError(fmt::format("{} '{}' is too long ({} characters; valid: {}, at most {})", flag,
                                 abbreviate_value(text, 40), text.size(), valid, max_length));
  if (text.find_first_of(std::string("\n\r\0", 3)) != std::string::npos)
    invalid_value(flag, text, valid + ", on one line");
}

std::string integer_range_text(std::int64_t lo, std::int64_t hi) {
  if (hi == std::numeric_limits<std::int64_t>::max())
    return fmt::format("an integer {} or more", lo);
  return fmt::format("an integer {}..{}", lo, hi);
}

namespace {

// Decimal digits with an optional leading '-': the magnitude and the sign, or nullopt. A
// magnitude past 2^64 - 1 reads as nullopt too (it is out of every range).
std::optional<std::pair<bool, std::uint64_t>> decimal(const std::string& text) {
  const bool negative = !text.empty() && text[0] == '-';
  const std::string digits = text.substr(negative ? 1 : 0);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  std::uint64_t v = 0;
  for (char c : digits) {
    const auto d = static_cast<std::uint64_t>(c - '0');
    if (v > (std::numeric_limits<std::uint64_t>::max() - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return std::make_pair(negative, v);
}

}  // namespace

std::int64_t parse_integer(const std::string& flag, const std::string& text, std::int64_t lo,
                           std::int64_t hi) {
  const std::string valid = integer_range_text(lo, hi);
  check_text(flag, text, valid, 64);
  const auto d = decimal(text);
  if (!d) invalid_value(flag, text, valid);
  const auto [negative, magnitude] = *d;
  constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (magnitude > kMax + (negative ? 1 : 0)) invalid_value(flag, text, valid);
  const std::int64_t v =
      negative ? static_cast<std::int64_t>(0 - magnitude) : static_cast<std::int64_t>(magnitude);
  if (v < lo || v > hi) invalid_value(flag, text, valid);
  return v;
}

std::uint64_t parse_unsigned(const std::string& flag, const std::string& text, std::uint64_t hi) {
  const std::string valid = fmt::format("an integer 0..{}", hi);
  check_text(flag, text, valid, 64);
  const auto d = decimal(text);
  if (!d || (d->first && d->second != 0) || d->second > hi) invalid_value(flag, text, valid);
  return d->second;
}

double parse_real(const std::string& flag, const std::string& text, double lo, double hi,
                  bool lo_open) {
  const std::string valid = Real{lo, hi, lo_open}.valid();
  check_text(flag, text, valid, 64);
  // Decimal forms only: strtod would also take blanks, hexadecimal, "inf" and "nan".
  if (text.find_first_not_of("0123456789.eE+-") != std::string::npos)
    invalid_value(flag, text, valid);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || errno == ERANGE || !std::isfinite(v) ||
      (lo_open ? !(v > lo) : !(v >= lo)) || !(v <= hi))
    invalid_value(flag, text, valid);
  return v;
}

std::string Real::text(double v) const {
  return fmt::format("{}", v);
}

std::string Real::valid() const {
  return fmt::format("a finite number {} {}{}", lo_open ? ">" : ">=", lo,
                     hi < 1e300 ? fmt::format(" and at most {}", hi) : std::string());
}

}  // namespace dmuon::apps::options
