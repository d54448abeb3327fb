#include "dmuon/results/provenance.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <hdf5.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <string_view>
#include <vector>

#include "dmuon/base/build_info.hpp"
#include "dmuon/comm/nccl_communicator.hpp"
#include "kernels/blas_info.hpp"

namespace dmuon::results {
namespace {

std::string quote(const std::string& a) {
  if (a.empty()) return "''";
  bool safe = true;
  for (char c : a) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.' || c == '/' || c == ':' || c == '=' ||
                    c == ',' || c == '+' || c == '@' || c == '%';
    if (!ok) safe = false;
  }
  if (safe) return a;
  std::string out = "'";
  for (char c : a) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

// MPI_Get_library_version is one of the few calls MPI allows before MPI_Init (MPI-3 §8.1.1),
// so serial tools report it too.
std::string mpi_library_version() {
  char buf[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  if (MPI_Get_library_version(buf, &len) != MPI_SUCCESS) return "n/a";
  std::string s(buf, static_cast<std::size_t>(len));
  const auto nl = s.find_first_of("\n\r");
  if (nl != std::string::npos) s.resize(nl);
  while (!s.empty() && (s.back() == ' ' || s.back() == ',' || s.back() == '\0')) s.pop_back();
  return s;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string hdf5_runtime_version() {
  unsigned maj = 0, min = 0, rel = 0;
  if (H5get_libversion(&maj, &min, &rel) >= 0) return fmt::format("{}.{}.{}", maj, min, rel);
  return build_info::hdf5_version;
}

}  // namespace

std::string scheduler_job_description() {
  const std::string id = env("SLURM_JOB_ID");
  if (id.empty()) return env("PBS_JOBID").empty() ? "" : "pbs " + env("PBS_JOBID");
  std::string details;
  const auto add = [&details](const std::string& v) {
    if (!v.empty()) details += (details.empty() ? "" : ", ") + v;
  };
  add(env("SLURM_JOB_NAME"));
  const std::string nodes =
      env("SLURM_JOB_NUM_NODES").empty() ? env("SLURM_NNODES") : env("SLURM_JOB_NUM_NODES");
  if (!nodes.empty()) add(nodes + " nodes");
  if (!env("SLURM_CLUSTER_NAME").empty()) add("cluster " + env("SLURM_CLUSTER_NAME"));
  if (!env("SLURM_JOB_PARTITION").empty()) add("partition " + env("SLURM_JOB_PARTITION"));
  // "slurm <id> nodes <list> (<name>, <n> nodes, ...)": the node list first, so a scaling
  // study's files say where each point ran.
  return fmt::format("slurm {} nodes {}{}", id, env("SLURM_JOB_NODELIST"),
                     details.empty() ? "" : " (" + details + ")");
}

std::string transport_settings() {
  // Open MPI: only the frameworks that move and combine the data; the launcher adds its own
  // OMPI_MCA_ess/orte/pmix variables (job ids, URIs) that differ on every run.
  static const char* const kPrefixes[] = {"OMPI_MCA_btl",  "OMPI_MCA_pml", "OMPI_MCA_mtl",
                                          "OMPI_MCA_coll", "OMPI_MCA_osc", "UCX_",
                                          "NCCL_",         "FI_"};
  std::vector<std::string> set;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view kv(*e);
    for (const char* prefix : kPrefixes)
      if (kv.rfind(prefix, 0) == 0) {
        set.emplace_back(kv);
        break;
      }
  }
  std::sort(set.begin(), set.end());
  return fmt::format("{}", fmt::join(set, " "));
}

std::string version_text(const std::string& tool) {
  std::string s = fmt::format("{} (dmuon-bench) {}\n", tool, build_info::version);
  s += fmt::format("git commit {}\n", build_info::git_commit());
  s += fmt::format("build type {}, compiler {}\n", build_info::build_type, build_info::compiler);
  s += fmt::format("CUDA {}\n",
                   build_info::have_cuda ? build_info::cuda_version : "n/a (not built)");
  s += fmt::format("NCCL {}\n", build_info::have_nccl ? comm::nccl_version() : "n/a (not built)");
  s += fmt::format("Kokkos {}\n", build_info::kokkos_version);
  s +=
      fmt::format("HDF5 {} (built against {})\n", hdf5_runtime_version(), build_info::hdf5_version);
  s += fmt::format("MPI {} (built against {})\n", mpi_library_version(), build_info::mpi_version);
  const auto b = kernels::host::blas_info();
  s += fmt::format("BLAS {}{}\n", b.library, b.core.empty() ? "" : ", kernels " + b.core);
  return s;
}

std::string shell_quote_command_line(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) {
    if (i) s += ' ';
    s += quote(argv[i] ? argv[i] : "");
  }
  return s;
}

std::string utc_now_iso8601() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

Provenance collect_provenance(int argc, char** argv, int world_size, int replicate) {
  Provenance p;
  p.schema_version = kSchemaVersion;
  p.suite_version = build_info::version;
  p.git_commit = build_info::git_commit();
  p.build_type = build_info::build_type;
  p.compiler = build_info::compiler;
  p.mpi_version = mpi_library_version();
  p.kokkos_version = build_info::kokkos_version;
  p.hdf5_version = hdf5_runtime_version();
  p.cuda_version = build_info::have_cuda ? build_info::cuda_version : "n/a";
  p.nccl_version = build_info::have_nccl ? comm::nccl_version() : "n/a";
  const auto blas = kernels::host::blas_info();
  p.device = "host";
  p.device_model = blas.cpu_model;
  p.cpu_features = blas.cpu_features;
  p.blas_library = blas.library;
  p.blas_core = blas.core.empty() ? "unknown" : blas.core;
  p.scheduler_job = scheduler_job_description();
  p.transport_settings = transport_settings();
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0)
    p.hostnames = {host};
  else
    p.hostnames = {"unknown"};
  p.date_utc = utc_now_iso8601();
  p.command_line = shell_quote_command_line(argc, argv);
  p.world_size = world_size;
  p.replicate = replicate;
  return p;
}

}  // namespace dmuon::results
