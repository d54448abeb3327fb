#pragma once
// One-process reference weights in a file, so a machine that cannot compute them (the GPU
// check machine has no Kokkos or BLAS) can still --check against the host's arithmetic. The
// file names what produced it (the settings the weights depend on, every parameter's name and
// size), and reading it refuses a file made for other settings.
//
// Format: the line "DMUON-REFERENCE 1", one line of JSON (the header below), then the weights
// as little-endian fp32, parameter after parameter in tree.parameter_order().

#include <string>
#include <vector>

#include "dmuon/engine/engine_options.hpp"
#include "dmuon/model/module_tree.hpp"
#include "dmuon/plan/plan.hpp"

namespace dmuon::engine {

/// The header of a reference for these settings (what reference_weights depends on): a
/// canonical JSON text.
std::string reference_header(const model::ModuleTree& tree, const plan::Plan& plan,
                             const EngineOptions& o, int world);

/// Writes `weights` (reference_weights' result) atomically (temporary file, then rename).
void write_reference(const std::string& path, const std::string& header,
                     const std::vector<std::vector<float>>& weights);

/// Reads a reference written for exactly `header`; throws InputError naming the file and what
/// differs (or what is damaged) otherwise.
std::vector<std::vector<float>> read_reference(const std::string& path, const std::string& header,
                                               const model::ModuleTree& tree);

}  // namespace dmuon::engine
