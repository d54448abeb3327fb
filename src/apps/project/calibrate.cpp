#include "project/calibrate.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <functional>
#include <vector>

#include "common/run_main.hpp"
#include "dmuon/base/check.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/comm/communicator.hpp"
#include "dmuon/engine/synthetic.hpp"
#include "dmuon/project/collective_cost.hpp"
#include "dmuon/project/machine_model.hpp"
#include "dmuon/results/provenance.hpp"
#include "dmuon/results/results_writer.hpp"
#include "kernels/convert.hpp"
#include "kernels/linear.hpp"
#include "kernels/scoped_kokkos.hpp"

namespace dmuon::apps::project {
namespace {

// Median over `reps` of the slowest rank's time of `f`, all ranks starting together.
double timed(MPI_Comm world, int reps, const std::function<void()>& f) {
  std::vector<double> t;
  f();  // warm-up: first-touch pages, BLAS buffers, MPI connections
  for (int i = 0; i < reps; ++i) {
    DMUON_CHECK_MPI(MPI_Barrier(world));
    const double t0 = MPI_Wtime();
    f();
    double mine = MPI_Wtime() - t0, slowest = 0;
    DMUON_CHECK_MPI(MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, world));
    t.push_back(slowest);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
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

}  // namespace

int calibrate(const ProjectOptions& o, MPI_Comm world) {
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
  auto& c = m.compute;

  // GEMM: the host's fp32 BLAS on a square product, all ranks at once.
  const std::size_t g = 1024;
  std::vector<float> a(g * g, 0.5f), b(g * g, 0.25f), cm(g * g, 0.0f);
  const double t_gemm = timed(world, 9, [&] {
    kernels::host::gemm(false, false, g, g, g, 1.0f, a.data(), b.data(), 0.0f, cm.data());
  });
  const double gemm_flops = 2.0 * g * g * g / t_gemm;
  for (auto& p : c.peak_tflops) p = gemm_flops / 1e12;
  c.gemm_efficiency = 1.0;
  c.sm_count = 0;
  // A thin one, as the engine's per-rank sample counts make them: its rate relative to the
  // square one gives the shape curve d / (d + half_dim) at d = 16.
  const std::size_t thin = 16;
  const double t_thin = timed(world, 9, [&] {
    kernels::host::gemm(false, false, thin, g, g, 1.0f, a.data(), b.data(), 0.0f, cm.data());
  });
  const double thin_flops = 2.0 * thin * g * g / t_thin;
  c.gemm_half_dim = std::max(0.0, static_cast<double>(thin) * (gemm_flops / thin_flops - 1.0));

  // Memory: a streaming copy (read + write).
  const std::size_t n = std::size_t{8} << 20;
  std::vector<float> src(n, 1.0f), dst(n, 0.0f);
  const double t_copy = timed(world, 9, [&] { std::copy(src.begin(), src.end(), dst.begin()); });
  c.memory_bandwidth_gbps = 2.0 * static_cast<double>(n) * sizeof(float) / t_copy / 1e9;
  c.memory_efficiency = 1.0;

  // Kernel overhead: one host kernel on one element (what a launch costs, amortised).
  std::uint16_t one = 0;
  const int kernels_per_rep = 1000;
  const double t_kernel = timed(world, 5, [&] {
    for (int i = 0; i < kernels_per_rep; ++i)
      kernels::host::convert(src.data(), kernels::Dtype::f32, &one, kernels::Dtype::bf16, 1);
  });
  c.kernel_overhead_us = 1e6 * t_kernel / kernels_per_rep;

  // The engine's synthetic draw.
  const std::int64_t draw = 1 << 20;
  const double t_draw =
      timed(world, 5, [&] { engine::synthetic_fill_row(1, 1, 0, 0, 1, dst.data(), draw); });
  c.synthetic_elements_per_s = static_cast<double>(draw) / t_draw;

  // Collectives through the engine's MPI communicator (nonblocking batch + wait).
  const auto comm = comm::make_communicator(comm::Backend::mpi, world);
  const std::size_t small = 256, large = std::size_t{1} << 20;  // floats: 1 KB and 4 MB
  std::vector<float> buf(large * static_cast<std::size_t>(size), 1.0f),
      out(large * static_cast<std::size_t>(size), 0.0f);
  m.measured.ranks = size;
  std::string lines;
  double allreduce_busbw = 0;
  for (auto kind : comm::kAllCollectiveKinds) {
    auto run = [&](std::size_t count) {
      comm->group_start();
      switch (kind) {
        case comm::CollectiveKind::broadcast:
          comm->broadcast(buf.data(), count, comm::DType::f32, 0);
          break;
        case comm::CollectiveKind::reduce:
          comm->reduce_avg(buf.data(), rank == 0 ? out.data() : nullptr, count, comm::DType::f32,
                           0);
          break;
        case comm::CollectiveKind::reduce_scatter:
          comm->reduce_scatter_avg(buf.data(), out.data(), count, comm::DType::f32);
          break;
        case comm::CollectiveKind::all_gather:
          comm->all_gather(buf.data(), out.data(), count, comm::DType::f32);
          break;
        case comm::CollectiveKind::all_reduce:
          comm->all_reduce_avg(buf.data(), out.data(), count, comm::DType::f32);
          break;
      }
      comm->group_end().wait();
    };
    const double t_small = timed(world, 9, [&] { run(small); });
    const double t_large = timed(world, 5, [&] { run(large); });
    const double f = dmuon::project::busbw_factor(kind, size);
    const double s_small = dmuon::project::message_bytes(kind, small, 4, size);
    const double s_large = dmuon::project::message_bytes(kind, large, 4, size);
    // t = latency + S·f / busbw through both points.
    double busbw = (s_large - s_small) * f / std::max(1e-9, t_large - t_small);
    double latency = t_small - s_small * f / busbw;
    if (latency < 0) latency = 0;
    m.measured.kinds[static_cast<std::size_t>(kind)] =
        dmuon::project::MeasuredCollective{latency * 1e6, busbw / 1e9};
    if (kind == comm::CollectiveKind::all_reduce) allreduce_busbw = busbw / 1e9;
    lines +=
        fmt::format("{}: {:.1f} us at {} B, {:.3f} ms at {} B\n", comm::collective_kind_name(kind),
                    1e6 * t_small, static_cast<long long>(s_small), 1e3 * t_large,
                    static_cast<long long>(s_large));
  }
  m.intra.busbw_gbps = allreduce_busbw;

  if (rank == 0) {
    const std::string comment = fmt::format(
        "Machine model measured by dmuon_project --calibrate on {} with {} ranks, {}.\n"
        "Every rank measured at the same time (shared cores show as they do in a run);\n"
        "times are the median over repetitions of the slowest rank.\n"
        "compute.peak_tflops: fp32 GEMM 1024^3 through the host BLAS ({:.3f} ms);\n"
        "  bf16/fp16 equal to it (the host computes in fp32). gemm_half_dim: from a\n"
        "  16 x 1024 x 1024 GEMM ({:.3f} ms, {:.1f} GFLOP/s against {:.1f}).\n"
        "memory_bandwidth_GBps: 32 MB streaming copy ({:.3f} ms); kernel_overhead_us: one\n"
        "  host kernel on one element; synthetic_elements_per_s: the engine's draw.\n"
        "network.measured: the engine's MPI communicator, latency and bus bandwidth from two\n"
        "  sizes per kind (nccl-tests factors):\n{}"
        "network.intra.busbw_GBps: the all_reduce bus bandwidth (fallback for other sizes).",
        host_name(), size, results::utc_now_iso8601(), 1e3 * t_gemm, 1e3 * t_thin, thin_flops / 1e9,
        gemm_flops / 1e9, 1e3 * t_copy, lines);
    const std::string text = dmuon::project::to_yaml(m, comment);
    // What is written must read back: the same validation as any machine file.
    (void)dmuon::project::parse_machine(text, o.output_machine);
    std::ofstream f(o.output_machine);
    if (!(f << text))
      throw RuntimeFailure(fmt::format("cannot write machine file '{}'", o.output_machine));
    std::printf("# dmuon_project --calibrate: wrote %s (%d ranks)\n%s", o.output_machine.c_str(),
                size, text.c_str());
  }
  return kOk;
}

}  // namespace dmuon::apps::project
