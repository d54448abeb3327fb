#include "project/calibrate.hpp"

#include "dmuon/base/atomic_file.hpp"

#include <fmt/format.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <vector>

#include "common/run_main.hpp"
#include "dmuon/base/check.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/comm/communicator.hpp"
#include "dmuon/engine/step/synthetic.hpp"
#include "dmuon/project/collective_cost.hpp"
#include "dmuon/project/latency_fit.hpp"
#include "dmuon/project/machine_model.hpp"
#include "dmuon/results/provenance.hpp"
#include "dmuon/results/results_writer.hpp"
#include "kernels/convert.hpp"
#include "kernels/linear.hpp"
#include "kernels/scoped_kokkos.hpp"

namespace dmuon::apps::project {
namespace {

// Median over `reps` of the slowest rank's time of `f`, all ranks starting together; ranks
// with `active` false take part in the synchronisation only (the compute probes run on as
// many ranks as there are cores: see cores_of_node).
double timed(MPI_Comm world, int reps, const std::function<void()>& f, bool active = true) {
  std::vector<double> t;
  if (active) f();  // warm-up: first-touch pages, BLAS buffers, MPI connections
  for (int i = 0; i < reps; ++i) {
    DMUON_CHECK_MPI(MPI_Barrier(world));
    const double t0 = MPI_Wtime();
    if (active) f();
    double mine = active ? MPI_Wtime() - t0 : 0.0, slowest = 0;
    DMUON_CHECK_MPI(MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, world));
    t.push_back(slowest);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// The CPUs the ranks may run on: the union of every rank's affinity mask (one node). Open MPI
// binds one rank per core when the ranks fit and leaves them unbound when oversubscribed;
// either way the union is the cores the job shares.
int cores_of_node(MPI_Comm world) {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  if (sched_getaffinity(0, sizeof mine, &mine) != 0) {
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    for (long i = 0; i < n && i < CPU_SETSIZE; ++i) CPU_SET(static_cast<int>(i), &mine);
  }
  std::vector<unsigned char> bytes(sizeof mine), all(sizeof mine);
  std::memcpy(bytes.data(), &mine, sizeof mine);
  DMUON_CHECK_MPI(MPI_Allreduce(bytes.data(), all.data(), static_cast<int>(all.size()),
                                MPI_UNSIGNED_CHAR, MPI_BOR, world));
  cpu_set_t u;
  std::memcpy(&u, all.data(), sizeof u);
  return std::max(1, CPU_COUNT(&u));
}

std::string host_name() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) return "host";
  std::string s;
  for (const char* c = host; *c != 0; ++c) {
    const auto ch = static_cast<unsigned char>(*c);
    s += std::isalnum(ch) ? static_cast<char>(std::tolower(ch)) : '-';
  }
  return s.empty() ? "host" : s;
}

// What the compute probes measured, for the machine file's comment.
struct ComputeProbes {
  int computing = 1;  ///< ranks that ran the probes at once: min(N, cores)
  double t_gemm = 0, gemm_flops = 0, t_thin = 0, thin_flops = 0, t_copy = 0;
};

// Seconds of the host's fp32 GEMM of (rows x g) by (g x g), on the active ranks at once.
double time_gemm(MPI_Comm world, std::size_t rows, std::size_t g, bool active) {
  std::vector<float> a(g * g, 0.5f), b(g * g, 0.25f), c(g * g, 0.0f);
  return timed(
      world, 9,
      [&] {
        kernels::host::gemm(false, false, rows, g, g, 1.0f, a.data(), b.data(), 0.0f, c.data());
      },
      active);
}

// GEMM: a square product gives the peak rate; a thin one, as the engine's per-rank sample
// counts make them, its rate relative to the square one gives the shape curve d / (d +
// half_dim) at d = 16.
void measure_gemm(MPI_Comm world, bool active, dmuon::project::ComputeSpec& c, ComputeProbes& p) {
  const std::size_t g = 1024, thin = 16;
  p.t_gemm = time_gemm(world, g, g, active);
  p.gemm_flops = 2.0 * g * g * g / p.t_gemm;
  for (auto& peak : c.peak_tflops) peak = p.gemm_flops / 1e12;
  c.gemm_efficiency = 1.0;
  c.sm_count = 0;
  p.t_thin = time_gemm(world, thin, g, active);
  p.thin_flops = 2.0 * thin * g * g / p.t_thin;
  c.gemm_half_dim = std::max(0.0, static_cast<double>(thin) * (p.gemm_flops / p.thin_flops - 1.0));
}

// Memory (a streaming copy: read + write), the overhead of one host kernel on one element
// (what a launch costs, amortised) and the engine's synthetic draw.
void measure_memory(MPI_Comm world, bool active, dmuon::project::ComputeSpec& c, ComputeProbes& p) {
  const std::size_t n = std::size_t{8} << 20;
  std::vector<float> src(n, 1.0f), dst(n, 0.0f);
  p.t_copy = timed(
      world, 9, [&] { std::copy(src.begin(), src.end(), dst.begin()); }, active);
  c.memory_bandwidth_gbps = 2.0 * static_cast<double>(n) * sizeof(float) / p.t_copy / 1e9;
  c.memory_efficiency = 1.0;

  std::uint16_t one = 0;
  const int kernels_per_rep = 1000;
  const double t_kernel = timed(
      world, 5,
      [&] {
        for (int i = 0; i < kernels_per_rep; ++i)
          kernels::host::convert(src.data(), kernels::Dtype::f32, &one, kernels::Dtype::bf16, 1);
      },
      active);
  c.kernel_overhead_us = 1e6 * t_kernel / kernels_per_rep;

  const std::int64_t draw = 1 << 20;
  const double t_draw = timed(
      world, 5, [&] { engine::synthetic_fill_row(1, 1, 0, 0, 1, dst.data(), draw); }, active);
  c.synthetic_elements_per_s = static_cast<double>(draw) / t_draw;
}

// Ranks beyond the cores time-share them. A short kernel timed on every rank at once hides
// that (each rank times itself from when it runs), a long one shows it only partly, so the
// compute rates are measured as one rank alone on a core sees them: on min(N, cores) ranks
// at once (memory shared as in a run), and the replay multiplies every kernel by
// ranks / cores (compute_share in machine_model.hpp).
ComputeProbes measure_compute(MPI_Comm world, int rank, int size, dmuon::project::ComputeSpec& c) {
  ComputeProbes p;
  c.cores = cores_of_node(world);
  p.computing = std::min(size, c.cores);
  const bool active = rank < p.computing;
  measure_gemm(world, active, c, p);
  measure_memory(world, active, c, p);
  return p;
}

// One batch of one collective of `count` floats per rank, issued and waited for.
void run_collective(comm::Communicator& comm, comm::CollectiveKind kind, std::size_t count,
                    int rank, std::vector<float>& buf, std::vector<float>& out) {
  comm.group_start();
  switch (kind) {
    case comm::CollectiveKind::broadcast:
      comm.broadcast(buf.data(), count, comm::DType::f32, 0);
      break;
    case comm::CollectiveKind::reduce:
      comm.reduce_avg(buf.data(), rank == 0 ? out.data() : nullptr, count, comm::DType::f32, 0);
      break;
    case comm::CollectiveKind::reduce_scatter:
      comm.reduce_scatter_avg(buf.data(), out.data(), count, comm::DType::f32);
      break;
    case comm::CollectiveKind::all_gather:
      comm.all_gather(buf.data(), out.data(), count, comm::DType::f32);
      break;
    case comm::CollectiveKind::all_reduce:
      comm.all_reduce_avg(buf.data(), out.data(), count, comm::DType::f32);
      break;
    case comm::CollectiveKind::gather:
      comm.gather(buf.data(), rank == 0 ? out.data() : nullptr, count, comm::DType::f32, 0);
      break;
    case comm::CollectiveKind::scatter:
      comm.scatter(rank == 0 ? buf.data() : nullptr, out.data(), count, comm::DType::f32, 0);
      break;
    case comm::CollectiveKind::all_to_all:
      comm.all_to_all(buf.data(), out.data(), count, comm::DType::f32);
      break;
    case comm::CollectiveKind::send_recv:  // not a collective of the world: not calibrated
      throw std::logic_error("calibrate: send_recv is point to point");
  }
  comm.group_end().wait();
}

// Collectives through the engine's MPI communicator (nonblocking batch + wait), per kind at
// seven sizes, 1 KB to 4 MB per rank in steps of 4x (the engine's messages span that range),
// fitted by relative least squares: t = latency + S·f / busbw. Returns the measured points,
// one line per kind, for the machine file's comment.
std::string measure_collectives(MPI_Comm world, int rank, int size, dmuon::project::Machine& m) {
  const auto comm = comm::make_communicator(comm::Backend::mpi, world);
  const std::size_t small = 256, large = std::size_t{1} << 20;  // floats: 1 KB and 4 MB
  std::vector<float> buf(large * static_cast<std::size_t>(size), 1.0f),
      out(large * static_cast<std::size_t>(size), 0.0f);
  m.measured.ranks = size;
  std::string lines;
  for (auto kind : comm::kAllCollectiveKinds) {
    if (kind == comm::CollectiveKind::send_recv) continue;  // point to point (pipeline stages)
    const double f = dmuon::project::busbw_factor(kind, size);
    std::vector<double> xs, ts;
    std::string points;
    for (std::size_t count = small; count <= large; count *= 4) {
      const double t = timed(world, count >= large / 4 ? 5 : 9,
                             [&] { run_collective(*comm, kind, count, rank, buf, out); });
      const double s = dmuon::project::message_bytes(kind, count, 4, size);
      xs.push_back(s * f);
      ts.push_back(t);
      points += fmt::format(" {:.4g} ms at {} B;", 1e3 * t, static_cast<long long>(s));
    }
    const auto fit = dmuon::project::fit_latency_bandwidth(xs, ts);
    m.measured.kinds[static_cast<std::size_t>(kind)] =
        dmuon::project::MeasuredCollective{fit.latency_s * 1e6, fit.bandwidth / 1e9};
    // The all_reduce bus bandwidth is the fallback for other sizes.
    if (kind == comm::CollectiveKind::all_reduce) m.intra.busbw_gbps = fit.bandwidth / 1e9;
    lines += fmt::format("{}:{}\n", comm::collective_kind_name(kind), points);
  }
  return lines;
}

// The machine file's header: how each value was measured.
std::string calibration_comment(int size, const dmuon::project::Machine& m, const ComputeProbes& p,
                                const std::string& collective_lines) {
  return fmt::format(
      "Machine model measured by dmuon_project --calibrate on {} with {} ranks, {}.\n"
      "Collectives: every rank measured at the same time; compute: {} rank(s) at once, one\n"
      "per core (compute.cores: {}, the union of the ranks' CPU affinity masks; the replay\n"
      "multiplies compute by ranks / cores when the ranks outnumber them); times are the\n"
      "median over repetitions of the slowest rank.\n"
      "compute.peak_tflops: fp32 GEMM 1024^3 through the host BLAS ({:.3f} ms);\n"
      "  bf16/fp16 equal to it (the host computes in fp32). gemm_half_dim: from a\n"
      "  16 x 1024 x 1024 GEMM ({:.3f} ms, {:.1f} GFLOP/s against {:.1f}).\n"
      "memory_bandwidth_GBps: 32 MB streaming copy ({:.3f} ms); kernel_overhead_us: one\n"
      "  host kernel on one element; synthetic_elements_per_s: the engine's draw.\n"
      "network.measured: the engine's MPI communicator, latency and bus bandwidth fitted\n"
      "  (relative least squares, nccl-tests factors) to seven sizes per kind:\n{}"
      "network.intra.busbw_GBps: the all_reduce bus bandwidth (fallback for other sizes).",
      host_name(), size, results::utc_now_iso8601(), p.computing, m.compute.cores, 1e3 * p.t_gemm,
      1e3 * p.t_thin, p.thin_flops / 1e9, p.gemm_flops / 1e9, 1e3 * p.t_copy, collective_lines);
}

// Rank 0: writes the machine file, after checking that it reads back as any machine file.
// Written to a temporary name and renamed: a full disk leaves no empty or partial file.
void write_machine_file(const ProjectionChoice& o, int size, const dmuon::project::Machine& m,
                        const std::string& comment) {
  const std::string text = dmuon::project::to_yaml(m, comment);
  (void)dmuon::project::parse_machine(text, o.output_machine);
  write_file_atomically(o.output_machine, text, "machine file");
  std::printf("# dmuon_project --calibrate: wrote %s (%d ranks)\n%s", o.output_machine.c_str(),
              size, text.c_str());
}

}  // namespace

int calibrate(const ProjectionChoice& o, MPI_Comm world) {
  int rank = 0, size = 1;
  DMUON_CHECK_MPI(MPI_Comm_rank(world, &rank));
  DMUON_CHECK_MPI(MPI_Comm_size(world, &size));
  if (size < 2)
    throw InputError(fmt::format(
        "--calibrate measures collectives: run it under mpirun -n N with N >= 2 (got {} rank)",
        size));
  if (rank == 0) results::check_output_writable(o.output_machine);
  kernels::host::ScopedKokkos kokkos;

  dmuon::project::Machine m;
  m.name = o.machine_name.empty() ? "calibrated-" + host_name() : o.machine_name;
  m.device = dmuon::project::DeviceKind::cpu;
  m.ranks_per_node = size;
  m.nvlink_domain = size;
  m.description =
      fmt::format("measured on {} with {} ranks by dmuon_project --calibrate", host_name(), size);
  const ComputeProbes probes = measure_compute(world, rank, size, m.compute);
  const std::string collective_lines = measure_collectives(world, rank, size, m);
  if (rank == 0)
    write_machine_file(o, size, m, calibration_comment(size, m, probes, collective_lines));
  return kOk;
}

}  // namespace dmuon::apps::project
