#pragma once
// Agreeing on set-up success before the first collective. Every rank validates its inputs on
// its own (flags, config and topology files, output path); when they differ between ranks — a
// file missing on one node, a different config — one rank fails while the others would walk
// into a collective and wait forever. run_setup() runs the set-up on every rank, then one small
// collective tells every rank whether any rank failed and with which message, so all ranks
// leave together: exit 2 for bad input (the failing rank's one line, printed by rank 0), and an
// abort naming the rank for anything unexpected.

#include <mpi.h>

#include <functional>

namespace dmuon::apps {

/// Runs `setup` on every rank of `comm`, then agrees (collectively) on the outcome. Returns
/// normally when every rank succeeded. Otherwise every rank throws: InputError "rank R: <R's
/// message>" (the lowest failing rank; without the prefix when every rank failed with the same
/// message) when the failures were bad input; for an unexpected failure the lowest failing
/// rank aborts the job (comm::abort_all with its message) and the others wait to be ended.
void run_setup(MPI_Comm comm, const std::function<void()>& setup);

/// Collective: true when every rank of `comm` passed `go` (a rank that printed --help or
/// --version and is done passes false: every rank then leaves together).
bool all_ranks_go(MPI_Comm comm, bool go);

}  // namespace dmuon::apps
