#pragma once
// The barrier every measured step starts from, and how long this rank waited at it.
//
// Without it a rank that finished its step early (it owns less Newton–Schulz work, or its
// cores were not disturbed) carries that lead into the next step and spends it waiting in the
// first collective whose root is late, where it would be counted as exposed communication.
// Aligned starts keep load imbalance out of the communication phases and report it on its
// own (Phase::step_sync), as the projection's replay does.

#include <mpi.h>

namespace dmuon::comm {

/// MPI_Barrier on `comm`; milliseconds from the call to its return.
double timed_barrier_ms(MPI_Comm comm);

}  // namespace dmuon::comm
