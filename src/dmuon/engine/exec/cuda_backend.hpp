#pragma once
// The CUDA machine for the step executor (--device cuda): one GPU per rank chosen from the
// node-local rank, NCCL communicators for the world, shard and replicate groups, device
// buffers for the step layout (weights from a pool sized by the prefetch window), cuBLAS
// synthetic compute in the wire dtype, Newton–Schulz in --ns-dtype, streams ordered by CUDA
// events (compute; broadcast/all-gather; a high-priority reduce stream; replicate), phase
// timing by CUDA events on the compute stream, one host synchronisation per step.
// Built when CUDA and NCCL are (DMUON_HAVE_NCCL); otherwise the factory reports that.

#include <mpi.h>

#include <memory>

#include "dmuon/comm/rank_groups.hpp"
#include "dmuon/engine/exec/step_backend.hpp"
#include "dmuon/engine/step/engine_options.hpp"
#include "dmuon/model/module_tree.hpp"

namespace dmuon::engine {

/// Throws InputError (one line, the same on every rank) when this build has no CUDA backend.
void require_cuda_backend();

/// Collective over the world of `groups` (made for layout.me.grid): picks the GPU, creates the
/// NCCL communicators. Throws InputError on every rank when any rank sees no GPU (or fewer
/// GPUs than ranks on its node).
std::unique_ptr<StepBackend> make_cuda_backend(const model::ModuleTree& tree,
                                               const StepLayout& layout, const EngineOptions& o,
                                               const comm::RankGroups& groups);

}  // namespace dmuon::engine
