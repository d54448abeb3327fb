#pragma once
// One-process reference weights in a file, so a machine that cannot compute them (the GPU
// check machine has no Kokkos or BLAS) can still --check against the host's arithmetic. The
// file names what produced it (the settings the weights depend on, every parameter's name and
// size), and reading it refuses a file made for other settings.
//
// Format: the line "DMUON-REFERENCE 2", one line of JSON (the header below), one line of JSON
// with the reference's AdamW elements in the eps regime (reference.hpp: {"bound_per_step": b,
// "elements": [[parameter index, element, flagged steps], ...]}), then the weights as
// little-endian fp32, parameter after parameter in tree.parameter_order().

#include <string>
#include <vector>

#include "dmuon/engine/step/engine_options.hpp"
#include "dmuon/engine/verify/reference.hpp"
#include "dmuon/model/module_tree.hpp"
#include "dmuon/plan/plan.hpp"

namespace dmuon::engine {

/// The header of a reference for these settings (what reference_weights depends on, --clip-norm
/// and --accum included): a canonical JSON text.
std::string reference_header(const model::ModuleTree& tree, const plan::Plan& plan,
                             const EngineOptions& o, int world);

/// Writes `weights` (reference_weights' result) and the AdamW elements it flagged (`regime`;
/// none when null) atomically (temporary file, then rename).
void write_reference(const std::string& path, const std::string& header,
                     const std::vector<std::vector<float>>& weights,
                     const AdamwEpsRegime* regime = nullptr);

/// Reads a reference written for exactly `header`: the weights and its eps regime (what an fp32
/// --check excuses, as it does against a reference computed in the run). Throws InputError
/// naming the file and what differs (or what is damaged) otherwise.
ReferenceWeights read_reference_check(const std::string& path, const std::string& header,
                                      const model::ModuleTree& tree);

/// The weights of read_reference_check.
std::vector<std::vector<float>> read_reference(const std::string& path, const std::string& header,
                                               const model::ModuleTree& tree);

}  // namespace dmuon::engine
