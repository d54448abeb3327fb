#pragma once
// How an option's text becomes a value: one parser per kind of value (integer in a range,
// finite number in a range, one of a set of names, free text, a path, a switch), each with the
// one error line every bad value of that kind gets:
//   "--steps '0' is invalid (valid: an integer 1..100000)".
// The option table (option_table.hpp) names a kind per option, so a class of bad input (an
// empty value, a value that looks like a flag, hexadecimal, overflow, NaN, a name outside the
// set) is closed once, here, for every flag of that kind.

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "dmuon/base/error.hpp"

namespace dmuon::apps::options {

/// Throws InputError "<flag> '<text>' is invalid (valid: <valid>)" (the text abbreviated).
[[noreturn]] void invalid_value(const std::string& flag, const std::string& text,
                                const std::string& valid);

/// The checks every value passes first: not empty, not a flag (`--output= --check` makes
/// CLI11 take "--check" as the value), at most `max_length` characters, no NUL or line break.
void check_text(const std::string& flag, const std::string& text, const std::string& valid,
                std::size_t max_length = 4096);

/// Decimal integer text (optional '-', digits; no '+', blanks, hexadecimal or octal) within
/// [lo, hi]; leading zeros allowed. Out of range and not a number read alike.
std::int64_t parse_integer(const std::string& flag, const std::string& text, std::int64_t lo,
                           std::int64_t hi);
std::uint64_t parse_unsigned(const std::string& flag, const std::string& text, std::uint64_t hi);
/// Decimal number text (strtod's decimal forms; no hexadecimal, blanks, inf or nan) within the
/// range: lo < v when lo_open, else lo <= v; v <= hi.
double parse_real(const std::string& flag, const std::string& text, double lo, double hi,
                  bool lo_open);

/// "an integer 1..100000" (hi = INT64_MAX reads "1 or more").
std::string integer_range_text(std::int64_t lo, std::int64_t hi);

/// The kinds. Each has value_type, parse(flag, text) -> value, text(value) -> the canonical
/// text (what --flag=text sets again), valid() (for errors, --help and docs/OPTIONS.md) and
/// type_name() (CLI11's column in --help).

template <class T>
struct Integer {
  static_assert(std::is_integral_v<T>);
  using value_type = T;
  T lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
  T parse(const std::string& flag, const std::string& text) const {
    if constexpr (std::is_unsigned_v<T> && sizeof(T) == 8)
      return static_cast<T>(parse_unsigned(flag, text, hi));
    else
      return static_cast<T>(parse_integer(flag, text, lo, hi));
  }
  std::string text(T v) const { return std::to_string(v); }
  std::string valid() const {
    if constexpr (std::is_unsigned_v<T> && sizeof(T) == 8)
      return "an integer 0.." + std::to_string(hi);
    else
      return integer_range_text(lo, hi);
  }
  const char* type_name() const { return "INTEGER"; }
};

struct Real {
  using value_type = double;
  double lo = 0, hi = 1e300;
  bool lo_open = true;  ///< lo itself is invalid
  double parse(const std::string& flag, const std::string& text) const {
    return parse_real(flag, text, lo, hi, lo_open);
  }
  std::string text(double v) const;
  std::string valid() const;
  const char* type_name() const { return "NUMBER"; }
};

/// One of a fixed set of names: the domain's enum with its name function.
template <class E>
struct Choice {
  using value_type = E;
  std::vector<std::pair<E, std::string>> names;
  std::vector<std::pair<E, std::string>> aliases;  ///< also accepted, never written
  E parse(const std::string& flag, const std::string& text) const {
    check_text(flag, text, valid());
    for (const auto* table : {&names, &aliases})
      for (const auto& [value, name] : *table)
        if (name == text) return value;
    invalid_value(flag, text, valid());
  }
  std::string text(E v) const {
    for (const auto& [value, name] : names)
      if (value == v) return name;
    return "?";
  }
  std::string valid() const {
    std::string s;
    for (const auto& n : names) s += (s.empty() ? "" : ", ") + n.second;
    return s;
  }
  const char* type_name() const { return "NAME"; }
};

/// The names of `values` under the domain's name function.
template <class E, class NameFn>
Choice<E> choice(std::initializer_list<E> values, NameFn name) {
  Choice<E> c;
  for (E v : values) c.names.emplace_back(v, std::string(name(v)));
  return c;
}

/// Free text checked later by its consumer (a rule, a boundary spec, KEY=VALUE, a path):
/// here only what no valid value of any of them can be (check_text).
struct Text {
  using value_type = std::string;
  std::string what = "a non-empty value";
  std::size_t max_length = 4096;
  std::string parse(const std::string& flag, const std::string& text) const {
    check_text(flag, text, what, max_length);
    return text;
  }
  std::string text(const std::string& v) const { return v; }
  std::string valid() const { return what; }
  const char* type_name() const { return "TEXT"; }
};

/// An integer in a range, or one word standing for a value outside it (--trace-ranks all).
template <class T>
struct IntegerOr {
  using value_type = T;
  Integer<T> number;
  std::string word;
  T word_value;
  T parse(const std::string& flag, const std::string& text) const {
    if (text == word) return word_value;
    check_text(flag, text, valid());
    try {
      return number.parse(flag, text);
    } catch (const InputError&) {
      invalid_value(flag, text, valid());  // naming the word too
    }
  }
  std::string text(T v) const { return v == word_value ? word : number.text(v); }
  std::string valid() const { return number.valid() + ", or " + word; }
  const char* type_name() const { return "INTEGER"; }
};

/// A value that may be absent (the domain's default applies): the canonical text of absent is
/// "" (not written into configs).
template <class K>
struct Optional {
  using value_type = std::optional<typename K::value_type>;
  K kind;
  value_type parse(const std::string& flag, const std::string& text) const {
    return kind.parse(flag, text);
  }
  std::string text(const value_type& v) const { return v ? kind.text(*v) : std::string(); }
  std::string valid() const { return kind.valid(); }
  const char* type_name() const { return kind.type_name(); }
};

}  // namespace dmuon::apps::options
