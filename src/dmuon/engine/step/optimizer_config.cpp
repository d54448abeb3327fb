#include "dmuon/engine/step/optimizer_config.hpp"

namespace dmuon::engine {

kernels::MuonConfig muon_config(const EngineOptions& o) {
  kernels::MuonConfig c;
  c.ns.variant = o.backend.ns;
  return c;
}

const kernels::AdamWConfig& adamw_config() {
  static const kernels::AdamWConfig c{};
  return c;
}

}  // namespace dmuon::engine
