#pragma once
// The FSDP units the baselines wrap, by their own rule (not the swept boundary): one unit per
// repeated block plus the root, as torchtitan (`for block in model.layers: fully_shard(block)`,
// then the root) and the reference's own benchmark wrap a model.
//
// A repeated-block container is a module with two or more children, all named by their index
// ("0", "1", ... as in nn.ModuleList / nn.Sequential), all of one type, each with child modules
// of its own (a block, not a bare Linear). The blocks are the children of the OUTERMOST such
// containers: the search stops descending at a container, so the experts inside a decoder
// layer are not units, and a wrapper that holds one child or children of different types
// (a nested model's outer `layers` with a backbone and an action expert) is looked through to
// the repeated blocks inside. A model with none (a flat nn.Sequential of Linear, GELU, Linear)
// has the root alone.

#include <string>
#include <vector>

#include "dmuon/model/module_tree.hpp"

namespace dmuon::boundary {

struct RepeatedBlocks {
  std::vector<int> containers;  ///< module indices, pre-order
  std::vector<int> blocks;      ///< module indices, pre-order (children of the containers)
};

/// The outermost repeated-block containers of a finalized tree and their blocks.
RepeatedBlocks find_repeated_blocks(const model::ModuleTree& tree);

/// The baselines' FSDP units: the root, then every repeated block, in pre-order (module
/// indices).
std::vector<int> repeated_block_units(const model::ModuleTree& tree);

/// A boundary spec (boundary_policy.hpp) whose sites are exactly those units: a `paths:`
/// predicate matching the root and each block, so a parameter lands at its block, or at the
/// root when no block holds it.
std::string repeated_blocks_spec(const model::ModuleTree& tree);

/// What the units are, for tables: "root + 4 x MoELayer (layers.N)", "root alone (no
/// repeated blocks)".
std::string repeated_blocks_description(const model::ModuleTree& tree);

}  // namespace dmuon::boundary
