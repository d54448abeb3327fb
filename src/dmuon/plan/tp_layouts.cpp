#include "dmuon/plan/tp_layouts.hpp"

#include <fmt/format.h>

#include "dmuon/base/abbreviate.hpp"
#include "dmuon/base/error.hpp"

namespace dmuon::plan {

const std::vector<TpLayout>& tp_layouts() {
  static const std::vector<TpLayout> layouts = {
      {"dp_only", 8, 1, 8, 1}, {"hsdp_2x4", 8, 2, 4, 1}, {"tp2", 2, 1, 1, 2},
      {"tp4", 4, 1, 1, 4},     {"tp8", 8, 1, 1, 8},      {"dp_tp2", 8, 1, 4, 2},
      {"dp_tp4", 8, 1, 2, 4},  {"dp_tp8", 16, 1, 2, 8},  {"hsdp_tp2", 8, 2, 2, 2},
  };
  return layouts;
}

const TpLayout& find_tp_layout(std::string_view name) {
  std::string valid;
  for (const auto& l : tp_layouts()) {
    if (l.name == name) return l;
    valid += (valid.empty() ? "" : ", ") + l.name;
  }
  throw InputError(fmt::format("unknown layout '{}' (valid: {})", abbreviate_value(name), valid));
}

}  // namespace dmuon::plan
