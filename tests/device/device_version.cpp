// --version text of the GPU-machine build (tests/device): that build has no HDF5, MPI, Kokkos or
// BLAS, so it cannot use results/provenance.cpp's version_text; this one reports what it has.
#include <cuda_runtime_api.h>

#include <string>

#include "dmuon/comm/nccl_communicator.hpp"
#include "dmuon/results/provenance.hpp"

namespace dmuon::results {

std::string version_text(const std::string& tool) {
  int rt = 0, drv = 0;
  cudaRuntimeGetVersion(&rt);
  cudaDriverGetVersion(&drv);
  const auto v = [](int x) {
    return std::to_string(x / 1000) + "." + std::to_string(x % 1000 / 10);
  };
  return tool + " (dmuon-bench, GPU-machine build: no MPI, HDF5, Kokkos or BLAS)\n" +
         "git commit unknown (built outside the git tree)\n" + "CUDA runtime " + v(rt) +
         ", driver " + v(drv) + "\n" + "NCCL " + comm::nccl_version() + "\n" +
         "Kokkos n/a\nHDF5 n/a\nMPI n/a (serial stand-in)\n";
}

}  // namespace dmuon::results
