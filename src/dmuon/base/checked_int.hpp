#pragma once
// Checked 64-bit arithmetic for element counts, byte counts and costs. A model whose sizes do
// not fit in int64 is bad input: the overflow becomes an InputError whose message the caller
// builds (naming the parameter, site or rank), never a wrapped, negative number.

#include <cstdint>
#include <string>

#include "dmuon/base/error.hpp"

namespace dmuon {

namespace detail {
/// The caller's message, with the limit named unless it already is.
inline std::string with_int64_limit(std::string message) {
  if (message.find("limit") == std::string::npos) message += " (limit: 2^63-1)";
  return message;
}
}  // namespace detail

/// a + b, or throws InputError(what()) when the sum does not fit in int64.
template <class What>
std::int64_t checked_add(std::int64_t a, std::int64_t b, What&& what) {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) throw InputError(detail::with_int64_limit(what()));
  return r;
}

/// a * b, or throws InputError(what()) when the product does not fit in int64.
template <class What>
std::int64_t checked_mul(std::int64_t a, std::int64_t b, What&& what) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) throw InputError(detail::with_int64_limit(what()));
  return r;
}

}  // namespace dmuon
