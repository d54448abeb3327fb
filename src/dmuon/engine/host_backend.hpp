#pragma once
// The host machine for the step executor: Open MPI communicators over the rank layout, every
// buffer of the step layout owned by a Kokkos::View (one arena per kind), the host kernels
// (Kokkos + KokkosKernels/OpenBLAS, fp32 compute; a bf16 wire is converted at the edges) and
// a steady-clock phase timer. Kokkos must be initialised (kernels/scoped_kokkos.hpp).

#include <mpi.h>

#include <memory>

#include "dmuon/comm/rank_layout.hpp"
#include "dmuon/engine/engine_options.hpp"
#include "dmuon/engine/step_backend.hpp"
#include "dmuon/model/module_tree.hpp"

namespace dmuon::engine {

class TpExchange;

/// Collective over `world` (it creates the communicators). `layout` must outlive the backend.
/// With tensor parallelism (`tp`, outliving the backend) `tree` has the local shard shapes,
/// `world` is this rank's DP group, and the schedule's TP ops (tp_gather, tp_scatter) of the
/// TP-sharded Muon parameters this rank owns run through `tp` (tp_engine.hpp), and --clip-norm's
/// all-reduce (CommGroup::world) runs over `clip_world`, the whole R x G x T world (default, or
/// MPI_COMM_NULL: `world`).
std::unique_ptr<StepBackend> make_host_backend(const model::ModuleTree& tree,
                                               const StepLayout& layout, const EngineOptions& o,
                                               const comm::RankLayout& ranks, MPI_Comm world,
                                               TpExchange* tp = nullptr,
                                               MPI_Comm clip_world = MPI_COMM_NULL);

}  // namespace dmuon::engine
