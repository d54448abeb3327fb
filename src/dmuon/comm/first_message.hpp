#pragma once
// "Tell every rank what the first failing rank saw": one small collective that every
// verdict spanning ranks needs (an audit mismatch, a set-up failure, a device that is missing
// on one node), so every rank prints and exits alike.

#include <mpi.h>

#include <string>

namespace dmuon::comm {

/// Collective over `comm`: the message of the lowest rank whose `failed` is set, on every rank;
/// "" when no rank failed. `first_rank` (optional) receives that rank (-1 when none failed).
std::string agree_first_message(bool failed, const std::string& message, MPI_Comm comm,
                                int* first_rank = nullptr);

}  // namespace dmuon::comm
