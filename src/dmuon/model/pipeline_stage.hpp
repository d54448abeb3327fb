#pragma once
// The model as one pipeline-parallel rank holds it (--pp P, docs/PROJECTION.md "Pipeline
// parallelism"), as torchtitan's pipeline split makes it: the blocks of the model's one stack
// cut into P·v consecutive chunks (v chunks per rank: the interleaved schedules' virtual
// stages), chunk c holding ⌊L/(P·v)⌋ blocks plus one for c < L mod (P·v); rank p holds chunks
// p, p + P, …; the input embedding lives on rank 0, the final norm and the output head on rank
// P − 1 (the ranks holding the first and the last chunk). Modules keep their names (a stage
// keeps `layers.8` as `layers.8`), so boundaries, dedication rules and plans apply unchanged.

#include <string>
#include <vector>

#include "dmuon/model/topology.hpp"

namespace dmuon::model {

/// The blocks (positions in the stack, ascending) rank `stage` of `stages` holds with `chunks`
/// chunks per rank, for a stack of `blocks` blocks.
std::vector<int> stage_blocks(int blocks, int stages, int chunks, int stage);

/// Rank `stage`'s model (see above). InputError (one line) when the model has no geometry or
/// more than one stack, fewer blocks than P·v, a module with parameters outside the blocks,
/// the embedding, the final norm and the head, or a parameter tied across ranks (a head tied
/// to the embedding).
Topology pipeline_stage(const Topology& whole, int stages, int chunks, int stage);

/// "layers 0-7, embedding" style summary of what rank `stage` holds (for notes and tables).
std::string stage_summary(const Topology& whole, int stages, int chunks, int stage);

}  // namespace dmuon::model
