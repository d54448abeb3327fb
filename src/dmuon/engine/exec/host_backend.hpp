#pragma once
// The host machine for the step executor: Open MPI communicators over the rank layout, every
// buffer of the step layout owned by a Kokkos::View (one arena per kind), the host kernels
// (Kokkos + KokkosKernels/OpenBLAS, fp32 compute; a bf16 wire is converted at the edges) and
// a steady-clock phase timer. Kokkos must be initialised (kernels/scoped_kokkos.hpp).

#include <mpi.h>

#include <memory>

#include "dmuon/comm/rank_groups.hpp"
#include "dmuon/engine/exec/step_backend.hpp"
#include "dmuon/engine/step/engine_options.hpp"
#include "dmuon/model/module_tree.hpp"

namespace dmuon::engine {

/// Collective over the world of `groups` (it creates the communicators of the layout's grid,
/// layout.me.grid: `groups` must be made for that grid). `layout` must outlive the backend.
/// With tensor parallelism `tree` has the local shard shapes (plan::tp_local_tree).
std::unique_ptr<StepBackend> make_host_backend(const model::ModuleTree& tree,
                                               const StepLayout& layout, const EngineOptions& o,
                                               const comm::RankGroups& groups);

}  // namespace dmuon::engine
