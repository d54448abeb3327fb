#pragma once
// Internal to the work model: the forward and backward ops of one block of a stack (pre-norm,
// attention, residual, pre-norm, MLP or MoE, residual), from the geometry and the block's
// linears in the module tree. Recompute is added by step_work.cpp.

#include <cstdint>

#include "dmuon/model/topology.hpp"
#include "dmuon/work/run_shape.hpp"
#include "dmuon/work/step_work.hpp"

namespace dmuon::work::detail {

WorkUnit block_unit(const model::Topology& t, const model::StackGeometry& s, int block,
                    std::int64_t index, const RunShape& shape);

}  // namespace dmuon::work::detail
