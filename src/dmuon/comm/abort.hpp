#pragma once
// Failure handling across ranks: end the whole job instead of leaving ranks hanging in a
// collective, and check that all ranks built the same plan before communicating with it.

#include <mpi.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace dmuon::comm {

/// Prints "dmuon: rank R: <message>" to stderr and calls MPI_Abort(MPI_COMM_WORLD, code), which
/// terminates every rank of the job. code 0 is turned into 1 (an abort never reports success).
/// Without an initialized (or after a finalized) MPI it prints "dmuon: <message>" and _Exit()s.
[[noreturn]] void abort_all(const std::string& message, int code = 1);

/// Collective over `comm`: checks every rank passed the same `hash` (e.g. fnv1a_64 of the plan).
/// On a mismatch every rank throws CheckFailure naming `what` and listing the ranks' values
/// (the first 16 ranks; all ranks agree on the outcome, so none is left waiting).
void verify_same_on_all_ranks(std::uint64_t hash, std::string_view what, MPI_Comm comm);

}  // namespace dmuon::comm
