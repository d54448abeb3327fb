// nccl_smoke: the first multi-rank step on a GPU machine, before dmuon_bench. Every rank
// (mpirun -n N; several may share one GPU, each its own NCCL host through NCCL_HOSTID) joins one
// NCCL communicator bootstrapped over MPI and all-reduces (sum) 1 Mi floats of rank + 1 per
// element, then checks every element is N(N+1)/2 (exact in fp32 for small N). Built by
// scripts/device_mpi_pack.sh against the system's Open MPI, cudart and NCCL.
// Exit: 0 passed, 3 wrong result, 77 no GPU visible, 2 any other failure.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

int fail(int rank, const char* what, const char* why, int code) {
  std::fprintf(stderr, "nccl_smoke: rank %d: %s: %s\n", rank, what, why);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int devices = 0;
  const cudaError_t rc = cudaGetDeviceCount(&devices);
  int seen = rc == cudaSuccess ? devices : 0, fewest = 0;
  MPI_Allreduce(&seen, &fewest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (fewest == 0) {
    if (rank == 0) std::printf("nccl_smoke: no GPU visible (%s)\n", cudaGetErrorString(rc));
    MPI_Finalize();
    return 77;
  }
  if (cudaSetDevice(rank % devices) != cudaSuccess) return fail(rank, "cudaSetDevice", "", 2);
  ncclUniqueId id;
  if (rank == 0 && ncclGetUniqueId(&id) != ncclSuccess) return fail(rank, "ncclGetUniqueId", "", 2);
  MPI_Bcast(&id, static_cast<int>(sizeof(id)), MPI_BYTE, 0, MPI_COMM_WORLD);
  const auto t0 = std::chrono::steady_clock::now();
  ncclComm_t comm = nullptr;
  ncclResult_t nr = ncclCommInitRank(&comm, size, id, rank);
  if (nr != ncclSuccess) return fail(rank, "ncclCommInitRank", ncclGetErrorString(nr), 2);
  const auto t1 = std::chrono::steady_clock::now();
  constexpr std::size_t kCount = std::size_t{1} << 20;
  std::vector<float> host(kCount, static_cast<float>(rank + 1));
  float* buf = nullptr;
  cudaStream_t stream = nullptr;
  if (cudaMalloc(&buf, kCount * sizeof(float)) != cudaSuccess ||
      cudaStreamCreate(&stream) != cudaSuccess ||
      cudaMemcpy(buf, host.data(), kCount * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess)
    return fail(rank, "CUDA set-up", cudaGetErrorString(cudaGetLastError()), 2);
  nr = ncclAllReduce(buf, buf, kCount, ncclFloat32, ncclSum, comm, stream);
  if (nr != ncclSuccess) return fail(rank, "ncclAllReduce", ncclGetErrorString(nr), 2);
  if (cudaStreamSynchronize(stream) != cudaSuccess ||
      cudaMemcpy(host.data(), buf, kCount * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess)
    return fail(rank, "CUDA wait", cudaGetErrorString(cudaGetLastError()), 2);
  const auto t2 = std::chrono::steady_clock::now();
  const float want = 0.5f * static_cast<float>(size) * static_cast<float>(size + 1);
  std::size_t wrong = 0;
  for (float v : host) wrong += v != want ? 1 : 0;
  std::size_t all_wrong = 0;
  MPI_Allreduce(&wrong, &all_wrong, 1, MPI_UNSIGNED_LONG, MPI_SUM, MPI_COMM_WORLD);
  const auto ms = [](auto a, auto b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };
  if (rank == 0)
    std::printf(
        "nccl_smoke: %d ranks, %d GPU(s) seen by rank 0: all-reduce of %zu floats %s "
        "(%zu wrong); init %.0f ms, all-reduce %.1f ms\n",
        size, devices, kCount, all_wrong == 0 ? "OK" : "FAILED", all_wrong, ms(t0, t1), ms(t1, t2));
  ncclCommDestroy(comm);
  cudaFree(buf);
  MPI_Finalize();
  return all_wrong == 0 ? 0 : 3;
}
