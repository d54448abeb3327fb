#include "dmuon/base/comma_list.hpp"

#include <fmt/format.h>

#include "dmuon/base/error.hpp"

namespace dmuon {

std::vector<std::string> split_comma_lists(const std::vector<std::string>& args, const char* flag) {
  std::vector<std::string> out;
  for (const auto& a : args) {
    std::size_t start = 0;
    for (;;) {
      const std::size_t comma = a.find(',', start);
      const std::size_t end = comma == std::string::npos ? a.size() : comma;
      if (end > start)
        out.push_back(a.substr(start, end - start));
      else if (flag)
        throw InputError(
            fmt::format("{} '{}' has an empty item (valid: names separated by single "
                        "commas, e.g. a,b)",
                        flag, a));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return out;
}

}  // namespace dmuon
