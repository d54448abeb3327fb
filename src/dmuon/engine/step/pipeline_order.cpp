#include "dmuon/engine/step/pipeline_order.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace dmuon::engine {

std::vector<PipelinePass> one_f_one_b(int stages, int stage, int micro_batches, int runs) {
  if (stages < 1 || stage < 0 || stage >= stages || micro_batches < 1 || runs < 1 ||
      micro_batches % runs != 0)
    throw std::logic_error(fmt::format("one_f_one_b: stage {} of {}, {} micro-batches in {} runs",
                                       stage, stages, micro_batches, runs));
  const int n = micro_batches / runs;
  const int warmup = std::min(stages - stage - 1, n);
  std::vector<PipelinePass> order;
  order.reserve(2 * static_cast<std::size_t>(micro_batches));
  for (int r = 0; r < runs; ++r) {
    const int first = r * n;
    int forwards = 0, backwards = 0;
    for (; forwards < warmup; ++forwards) order.push_back({true, first + forwards});
    while (forwards < n) {
      order.push_back({true, first + forwards++});
      order.push_back({false, first + backwards++});
    }
    while (backwards < n) order.push_back({false, first + backwards++});
  }
  return order;
}

int pipeline_stage_of(int world_rank, int world_size, int stages) {
  if (stages < 1 || world_size % stages != 0 || world_rank < 0 || world_rank >= world_size)
    throw std::logic_error(fmt::format("pipeline_stage_of: rank {} of {} in {} stages", world_rank,
                                       world_size, stages));
  return world_rank / (world_size / stages);
}

int in_flight_micro_batches(const PipelineStages& p, int micro_batches) {
  if (!p.active()) return 1;
  return std::max(1, std::min(p.count - p.stage, micro_batches / std::max(1, p.runs)));
}

double pipeline_buffer_bytes(const PipelineStages& p, int micro_batches) {
  const double n = static_cast<double>(p.message_elems);
  return static_cast<double>(sizeof(float)) * (2.0 * micro_batches * n + n);
}

PipelineTraffic pipeline_traffic_per_step(const PipelineStages& p, int micro_batches) {
  if (!p.active()) return {};
  // Per neighbour and micro-batch one send and one receive (activations one way, their
  // gradients the other), of which one message is this rank's.
  const int neighbours = (p.has_previous() ? 1 : 0) + (p.has_next() ? 1 : 0);
  PipelineTraffic t;
  t.calls = 2 * std::int64_t{micro_batches} * neighbours;
  t.bytes = std::int64_t{micro_batches} * neighbours * p.message_elems *
            static_cast<std::int64_t>(sizeof(float));
  return t;
}

}  // namespace dmuon::engine
