#pragma once
// dmuon_project --calibrate: measures the machine at hand, as the host engine uses it, under
// `mpirun -n N` (every rank measures at the same time, so shared cores and memory show up as
// they do in a run of N ranks), and writes a machine file (device cpu, one "node" of N ranks):
//
//   GEMM          fp32 rate of the host GEMM (kernels::host::gemm) on a square 1024³ product
//                 -> compute.peak_tflops (gemm_efficiency 1: the rate IS what BLAS reaches)
//   memory        a streaming copy of 32 MB -> memory_bandwidth_GBps (efficiency 1)
//   kernel        one host kernel on one element -> kernel_overhead_us
//   synthetic     the engine's counter-based draw (engine::synthetic_fill_row) -> elements/s
//   collectives   per kind, through the engine's own MPI communicator (nonblocking batch +
//                 wait): the time at seven sizes -> latency (intercept) and bus bandwidth
//                 (slope, nccl-tests factors; relative least squares) -> network.measured
// Times are the median over repetitions of the slowest rank. Rank 0 writes the file.

#include <mpi.h>

#include "options/run_options.hpp"

namespace dmuon::apps::project {

/// Collective over `world`. Returns the exit code.
int calibrate(const ProjectionChoice& o, MPI_Comm world);

}  // namespace dmuon::apps::project
