#include "dmuon/plan/reshard.hpp"

#include <fmt/format.h>

#include "dmuon/base/abbreviate.hpp"
#include "dmuon/base/error.hpp"

namespace dmuon::plan {

const char* reshard_name(Reshard r) {
  return r == Reshard::z3 ? "z3" : "z2";
}

Reshard parse_reshard(std::string_view s) {
  if (s == "z3" || s == "Z3") return Reshard::z3;
  if (s == "z2" || s == "Z2") return Reshard::z2;
  throw InputError(fmt::format("unknown reshard mode '{}' (valid: z3, z2)", abbreviate_value(s)));
}

}  // namespace dmuon::plan
