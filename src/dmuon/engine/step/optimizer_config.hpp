#pragma once
// The optimizer settings a run uses (SPEC §7 defaults plus the run's Newton–Schulz form), one
// definition for the host and CUDA backends and the --check reference.

#include "dmuon/engine/step/engine_options.hpp"
#include "kernels/adamw.hpp"
#include "kernels/muon.hpp"

namespace dmuon::engine {

/// Muon: lr 0.02, μ 0.95 Nesterov, no weight decay, 5 Polar Express steps in o.ns's form.
kernels::MuonConfig muon_config(const EngineOptions& o);
/// AdamW for the non-Muon parameters: lr 1e-3, betas (0.9, 0.999), eps 1e-8, wd 0.01.
const kernels::AdamWConfig& adamw_config();

}  // namespace dmuon::engine
