#pragma once
// The one-line message of the InputError `f` throws, or "(no InputError)": the tests of refused
// input compare it with the expected text.

#include <functional>
#include <string>

#include "dmuon/base/error.hpp"

namespace dmuon::test {

inline std::string input_error_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

}  // namespace dmuon::test
