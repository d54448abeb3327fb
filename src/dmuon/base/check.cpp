#include "dmuon/base/check.hpp"

#include <fmt/format.h>

namespace dmuon::detail {

void throw_call_failure(const char* library, const char* call, long code, const char* file,
                        int line, const std::string& detail) {
  throw RuntimeFailure(fmt::format("{} call failed (code {}): {} at {}:{}{}{}", library, code, call,
                                   file, line, detail.empty() ? "" : ": ", detail));
}

}  // namespace dmuon::detail
