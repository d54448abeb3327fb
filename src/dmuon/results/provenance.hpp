#pragma once
// Provenance of an invocation: versions of the suite and of every library it was built with,
// host(s), date and the exact command line, recorded as root attributes of the results file.

#include <string>
#include <vector>

#include "dmuon/results/run_record.hpp"

namespace dmuon::results {

/// Fills every Provenance field but the measured ones (sgemm_gflops, sgemm_size) and the
/// device of the run (device "host", device_model the CPU; a CUDA run replaces both). MPI's library
/// version is queried only when MPI is initialised (else "n/a"); the hostname is this process's
/// (the engine may replace `hostnames` with a list gathered from all ranks).
Provenance collect_provenance(int argc, char** argv, int world_size, int replicate);

/// argv joined with spaces, each argument single-quoted when it holds a shell metacharacter.
std::string shell_quote_command_line(int argc, char** argv);

/// "slurm <id> nodes <list> (<name>, <N> nodes, cluster C, partition P)" inside a Slurm job,
/// "pbs <id>" inside a PBS job, "" outside a scheduler.
std::string scheduler_job_description();

/// The environment that selects and tunes the transports under the collectives (Open MPI's
/// OMPI_MCA_{btl,pml,mtl,coll,osc}*, UCX_*, NCCL_*, FI_*), sorted, as "K=V K=V ..."; "" when
/// none is set.
/// Timings of two runs are comparable only when this (and the hardware) agree.
std::string transport_settings();

/// What every tool's --version prints: the suite version, git commit, build type and compiler,
/// and the CUDA, NCCL, Kokkos, HDF5, MPI and BLAS versions (run time where the library can
/// say, else build time), one per line.
std::string version_text(const std::string& tool);

/// Current UTC time as ISO-8601 ("2026-11-29T09:07:22Z").
std::string utc_now_iso8601();

}  // namespace dmuon::results
