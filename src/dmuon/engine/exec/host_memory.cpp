#include "dmuon/engine/exec/host_memory.hpp"

#include <fmt/format.h>

#include <fstream>
#include <string>

#include "dmuon/base/check.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/comm/first_message.hpp"
#include "dmuon/comm/unique_comm.hpp"
#include "kernels/dtype.hpp"

namespace dmuon::engine {

std::int64_t host_backend_bytes_at_least(const StepLayout& L) {
  const auto bytes = [](kernels::Dtype t) {
    return static_cast<std::int64_t>(kernels::dtype_bytes(t));
  };
  const std::int64_t fp32 = 4;
  return fp32 * (L.master_elems + 2 * L.state_elems + L.second_state_elems) +
         bytes(L.wire) * (L.weight_pool_elems + L.gather_pool_elems) +
         bytes(L.reduce) * (L.grad_arena_elems + L.grad_pool_elems) +
         bytes(L.alt_wire) * (L.alt_weight_elems + L.alt_gather_elems) +
         bytes(L.alt_reduce) * L.alt_grad_elems;
}

namespace {

// MemAvailable of /proc/meminfo in bytes; -1 where it cannot be read (not Linux).
std::int64_t available_host_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return -1;
}

}  // namespace

void check_host_memory(const StepLayout& layout, MPI_Comm world) {
  MPI_Comm raw = MPI_COMM_NULL;
  DMUON_CHECK_MPI(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &raw));
  const comm::UniqueComm node(raw);
  const std::int64_t mine = host_backend_bytes_at_least(layout);
  std::int64_t on_node = 0;
  int ranks = 1;
  DMUON_CHECK_MPI(MPI_Allreduce(&mine, &on_node, 1, MPI_INT64_T, MPI_SUM, node.get()));
  DMUON_CHECK_MPI(MPI_Comm_size(node.get(), &ranks));
  const std::int64_t available = available_host_bytes();
  std::string problem;
  if (available > 0 && on_node > available)
    problem = fmt::format(
        "the host backends of this node's {} rank(s) need at least {:.1f} GB (this rank {:.1f} "
        "GB: masters, optimizer state, Newton-Schulz inputs, wire pools), but the node has "
        "{:.1f} GB available: the model is too large for this host (a smaller --preset or "
        "--set dimensions, or the same ranks over more nodes; dmuon_project models it)",
        ranks, static_cast<double>(on_node) * 1e-9, static_cast<double>(mine) * 1e-9,
        static_cast<double>(available) * 1e-9);
  int first = -1;
  const std::string theirs = comm::agree_first_message(!problem.empty(), problem, world, &first);
  if (first >= 0) throw InputError(fmt::format("rank {}: {}", first, theirs));
}

}  // namespace dmuon::engine
