#include "dmuon/base/comma_list.hpp"

namespace dmuon {

std::vector<std::string> split_comma_lists(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (const auto& a : args) {
    std::size_t start = 0;
    for (;;) {
      const std::size_t comma = a.find(',', start);
      const std::size_t end = comma == std::string::npos ? a.size() : comma;
      if (end > start) out.push_back(a.substr(start, end - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return out;
}

}  // namespace dmuon
