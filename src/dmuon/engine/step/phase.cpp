#include "dmuon/engine/step/phase.hpp"

namespace dmuon::engine {

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::forward_comm: return "forward_comm";
    case Phase::forward_compute: return "forward_compute";
    case Phase::backward_compute: return "backward_compute";
    case Phase::backward_comm: return "backward_comm";
    case Phase::optimizer_ns: return "optimizer_ns";
    case Phase::optimizer_other: return "optimizer_other";
    case Phase::exposed_comm: return "exposed_comm";
    case Phase::step: return "step";
    case Phase::step_sync: return "step_sync";
  }
  return "?";
}

}  // namespace dmuon::engine
