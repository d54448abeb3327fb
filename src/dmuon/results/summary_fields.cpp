#include "dmuon/results/summary_fields.hpp"

namespace dmuon::results {

bool is_count_summary(const std::string& name) {
  for (const auto& f : summary_fields())
    if (f.kind == SummaryKind::count && name == f.name) return true;
  return false;
}

}  // namespace dmuon::results
