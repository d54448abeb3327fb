#include "dmuon/results/provenance.hpp"

#include <fmt/format.h>
#include <hdf5.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>

#include "dmuon/base/build_info.hpp"

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

std::string mpi_library_version() {
  int initialised = 0, finalised = 0;
  MPI_Initialized(&initialised);
  MPI_Finalized(&finalised);
  if (!initialised || finalised) return "n/a";
  char buf[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  if (MPI_Get_library_version(buf, &len) != MPI_SUCCESS) return "n/a";
  std::string s(buf, static_cast<std::size_t>(len));
  const auto nl = s.find_first_of("\n\r");
  if (nl != std::string::npos) s.resize(nl);
  while (!s.empty() && (s.back() == ' ' || s.back() == ',' || s.back() == '\0')) s.pop_back();
  return s;
}

}  // namespace

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
  p.git_commit = build_info::git_commit;
  p.build_type = build_info::build_type;
  p.compiler = build_info::compiler;
  p.mpi_version = mpi_library_version();
  p.kokkos_version = build_info::kokkos_version;
  unsigned maj = 0, min = 0, rel = 0;
  if (H5get_libversion(&maj, &min, &rel) >= 0)
    p.hdf5_version = fmt::format("{}.{}.{}", maj, min, rel);
  else
    p.hdf5_version = build_info::hdf5_version;
  p.cuda_version = build_info::have_cuda ? build_info::cuda_version : "n/a";
  // build_info carries no NCCL version string; record whether the NCCL backend is built in.
  p.nccl_version = build_info::have_nccl ? "built in" : "n/a";
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0)
    p.hostnames = {host};
  else
    p.hostnames = {"unknown"};
  p.date_utc = utc_now_iso8601();
  p.command_line = shell_quote_command_line(argc, argv);
  // A Slurm (or PBS) job: its id and node list, so a scaling study's files name their jobs.
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v ? v : "");
  };
  if (!env("SLURM_JOB_ID").empty())
    p.scheduler_job =
        fmt::format("slurm {} nodes {}", env("SLURM_JOB_ID"), env("SLURM_JOB_NODELIST"));
  else if (!env("PBS_JOBID").empty())
    p.scheduler_job = fmt::format("pbs {}", env("PBS_JOBID"));
  p.world_size = world_size;
  p.replicate = replicate;
  return p;
}

}  // namespace dmuon::results
