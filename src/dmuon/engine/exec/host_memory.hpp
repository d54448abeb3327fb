#pragma once
// Whether a host run fits in the host's memory, checked before the host backend allocates
// anything (no Kokkos here: the GPU check's build links it without the host backend).

#include <mpi.h>

#include <cstdint>

#include "dmuon/engine/step/step_layout.hpp"

namespace dmuon::engine {

/// Bytes the host backend allocates for `layout` at the least: its persistent arenas (fp32
/// masters, optimizer state, Newton-Schulz inputs) and the wire pools; workspaces come on top.
std::int64_t host_backend_bytes_at_least(const StepLayout& layout);

/// Collective over `world`: refuses (InputError on every rank, one line) a run whose ranks on
/// one node need more host memory for their backends than the node has available
/// (/proc/meminfo MemAvailable), before anything is allocated. A failed allocation would end
/// in the allocator's own text, or the kernel's OOM killer, instead.
void check_host_memory(const StepLayout& layout, MPI_Comm world);

}  // namespace dmuon::engine
