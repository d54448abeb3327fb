#include "options/option.hpp"

#include <fmt/format.h>

#include "dmuon/base/abbreviate.hpp"
#include "dmuon/base/error.hpp"
#include "options/option_parser.hpp"

namespace dmuon::apps::options {

const char* tool_name(Tool t) {
  switch (t) {
    case kInspect: return "dmuon_inspect";
    case kBench: return "dmuon_bench";
    case kProject: return "dmuon_project";
    case kAdvise: return "dmuon_advise";
  }
  return "?";
}

std::vector<std::string> comma_items(const std::string& flag, const std::string& text) {
  std::vector<std::string> items;
  std::size_t start = 0;
  while (true) {
    const auto end = text.find(',', start);
    const std::string item = text.substr(start, end == std::string::npos ? end : end - start);
    if (item.empty())
      throw InputError(fmt::format("{} '{}' has an empty item (valid: a comma list like a,b)", flag,
                                   abbreviate_value(text, 40)));
    items.push_back(item);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return items;
}

bool switch_on(const std::string& flag, const std::vector<std::string>& results) {
  const std::string last = results.empty() ? std::string("true") : results.back();
  if (last == "true" || last == "1") return true;
  if (last == "false" || last == "0" || last == "-1") return false;
  throw InputError(
      fmt::format("{}={} is invalid (a switch: give {} alone, or true/false in a "
                  "config)",
                  flag, abbreviate_value(last, 40), flag));
}

}  // namespace dmuon::apps::options
