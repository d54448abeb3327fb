#include "dmuon/project/pipeline_schedule.hpp"

#include <algorithm>
#include <stdexcept>

namespace dmuon::project {

double in_flight(const PipelineShape& s, int stage) {
  const int P = s.stages, v = s.chunks, m = s.run_micro_batches();
  if (v == 1) return std::min(m, P - stage);
  const int chunks = std::min(m * v, (P - stage - 1) * 2 + (v - 1) * P + 1);
  return static_cast<double>(chunks) / v;
}

PipelineTime pipeline_time(const PipelineShape& s, const std::vector<StageTime>& stages,
                           double send_ms) {
  if (static_cast<int>(stages.size()) != s.stages || s.micro_batches < 1 || s.chunks < 1 ||
      s.runs < 1 || s.micro_batches % s.runs != 0)
    throw std::logic_error("pipeline_time: one time per stage, m and v >= 1, r dividing m");
  const double m = s.micro_batches, v = s.chunks;
  double sum = 0, slowest = 0;
  for (const auto& st : stages) {
    sum += st.compute_ms / m;
    slowest = std::max(slowest, st.compute_ms / m);
  }
  PipelineTime t;
  t.span_ms =
      s.runs * ((sum - slowest) / v + 2.0 * (s.stages * s.chunks - 1) * send_ms) + m * slowest;
  for (int p = 0; p < s.stages; ++p) {
    const auto& st = stages[static_cast<std::size_t>(p)];
    t.bubble_ms.push_back(t.span_ms - st.compute_ms);
    const double step = st.step_ms + t.bubble_ms.back();
    if (p == 0 || step > t.step_ms) {
      t.step_ms = step;
      t.critical = p;
    }
  }
  return t;
}

}  // namespace dmuon::project
