#pragma once
// --check for the methods where every rank keeps a full replica and only some ranks update a
// parameter (ddp-dmuon: the owner, then its post-step broadcast): the reference is compared
// with rank 0's replica, so every other replica must also equal rank 0's. Outside the timed
// steps and the counted communicators (the world communicator's plain MPI calls).

#include <mpi.h>

#include <string>

#include "dmuon/engine/exec/step_backend.hpp"
#include "dmuon/engine/step/step_layout.hpp"

namespace dmuon::engine {

struct ReplicaDivergence {
  double max_rel_error = 0;  ///< max over ranks and parameters of ‖w_r − w_0‖ / ‖w_0‖
  int rank = 0;              ///< the rank where it is largest (0 when all agree)
  std::string param;         ///< its parameter (empty when all agree exactly)
};

/// Collective over `world`; every rank gets the result. `layout` must be a replicated layout
/// (every parameter has a master on every rank).
ReplicaDivergence replica_divergence(const StepLayout& layout, StepBackend& backend,
                                     MPI_Comm world);

}  // namespace dmuon::engine
