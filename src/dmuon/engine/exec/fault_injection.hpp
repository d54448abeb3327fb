#pragma once
// A test aid for the error path of a multi-rank run: DMUON_INJECT_FAULT_STEP=<step>:<rank>
// makes world rank <rank> throw in step <step> once that step's first collectives are in
// flight, so its peers sit in (or soon enter) a wait that never completes. The run must then
// end on every rank within seconds with that rank's message (end_mid_step_failure), never
// hang in a synchronisation.

#include <string>

#include <mpi.h>

namespace dmuon::engine {

class StepBackend;

struct FaultInjection {
  long step = -1;  ///< 1-based step; -1: none
  int rank = -1;   ///< world rank that fails
  bool armed() const { return step > 0; }
};

/// "<step>:<rank>" (step >= 1, rank >= 0); "" is none. Anything else is an InputError naming
/// the text and the valid form.
FaultInjection parse_fault_injection(const std::string& text);
/// DMUON_INJECT_FAULT_STEP, parsed (none when unset).
FaultInjection fault_injection_from_env();
/// InputError unless the injection names a step of the run and a rank of the job.
void check_fault_injection(const FaultInjection& f, long total_steps, int world_size);

/// The exception in flight left a step mid-way on this rank: aborts the backend's
/// communicators first (before anything synchronises), then on a run of several ranks ends
/// every rank at once with this rank's message through abort_all ("dmuon: rank R: failed
/// mid-step: ..."; exit 2 for bad input, 3 for a failed check, 1 otherwise); on one rank it
/// rethrows (no peer waits).
[[noreturn]] void end_mid_step_failure(StepBackend& backend, MPI_Comm world);

}  // namespace dmuon::engine
