#include "dmuon/results/results_writer.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>

#include "dmuon/base/atomic_file.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/comm/bus_bandwidth.hpp"
#include "dmuon/results/h5.hpp"
#include "dmuon/results/summary.hpp"

namespace dmuon::results {
namespace {

std::string join_hosts(const std::vector<std::string>& hosts) {
  std::string s;
  for (const auto& h : hosts) s += (s.empty() ? "" : ",") + h;
  return s;
}

// The nccl-tests bus factor of a stored kind name ("reduce", "replicate_broadcast",
// "world_all_reduce", ...: engine::channel_name's group prefixes).
double bus_factor(const std::string& kind_name, int n) {
  std::string bare = kind_name;
  for (const std::string prefix : {"replicate_", "world_"})
    if (bare.rfind(prefix, 0) == 0) bare = bare.substr(prefix.size());
  for (std::size_t k = 0; k < comm::kCollectiveKindCount; ++k) {
    const auto kind = static_cast<comm::CollectiveKind>(k);
    if (bare == comm::collective_kind_name(kind)) return comm::busbw_factor(kind, n);
  }
  return std::numeric_limits<double>::quiet_NaN();
}

std::vector<hsize_t> dims2(std::size_t a, std::size_t b) {
  return {static_cast<hsize_t>(a), static_cast<hsize_t>(b)};
}

void write_provenance(h5::Group& root, const Provenance& p, std::size_t runs) {
  root.write_attr("format", kFormatName);
  root.write_attr("schema_version", p.schema_version);
  root.write_attr("suite_version", p.suite_version);
  root.write_attr("git_commit", p.git_commit);
  root.write_attr("build_type", p.build_type);
  root.write_attr("compiler", p.compiler);
  root.write_attr("mpi_version", p.mpi_version);
  root.write_attr("kokkos_version", p.kokkos_version);
  root.write_attr("hdf5_version", p.hdf5_version);
  root.write_attr("cuda_version", p.cuda_version);
  root.write_attr("nccl_version", p.nccl_version);
  root.write_attr("hostnames", join_hosts(p.hostnames));
  root.write_attr("device", p.device);
  root.write_attr("device_model", p.device_model);
  root.write_attr("cpu_features", p.cpu_features);
  root.write_attr("blas_library", p.blas_library);
  root.write_attr("blas_core", p.blas_core);
  root.write_attr("sgemm_gflops", p.sgemm_gflops);
  root.write_attr("sgemm_size", p.sgemm_size);
  root.write_attr("date_utc", p.date_utc);
  root.write_attr("command_line", p.command_line);
  root.write_attr("scheduler_job", p.scheduler_job);
  root.write_attr("transport_settings", p.transport_settings);
  root.write_attr("world_size", p.world_size);
  root.write_attr("replicate", p.replicate);
  root.write_attr("num_runs", static_cast<std::int64_t>(runs));
}

void write_run(h5::Group& g, const RunRecord& r) {
  g.write_attr("status", r.status);
  g.write_attr("error", r.error);
  g.write_attr("config", r.config_text);
  g.write_attr("topology", r.topology);
  g.write_attr("preset", r.preset);
  g.write_attr("dedicate_rule", r.dedicate_rule);
  g.write_attr("method", r.method);
  g.write_attr("reshard", r.reshard);
  g.write_attr("grad_reduce", r.grad_reduce);
  g.write_attr("prefetch", r.prefetch);
  g.write_attr("device", r.device);
  g.write_attr("comm_dtype", r.comm_dtype);
  g.write_attr("ns", r.ns);
  g.write_attr("ns_dtype", r.ns_dtype);
  g.write_attr("optimizer_pipeline", r.optimizer_pipeline);
  g.write_attr("clip_norm", r.clip_norm);
  g.write_attr("accum", r.accum);
  g.write_attr("world_size", r.world_size);
  g.write_attr("replicate", r.replicate);
  g.write_attr("tp", r.tp);
  g.write_attr("compute", r.compute);
  g.write_attr("global_samples", r.global_samples);
  g.write_attr("steps", r.steps);
  g.write_attr("warmup", r.warmup);
  g.write_attr("seed", r.seed);
  g.write_attr("sets", r.sets);
  g.write_attr("plan_options", r.plan_options);

  const h5::DatasetMeta row{"", {"module"}};
  {
    auto topo = g.create_group("topology");
    auto m = topo.create_group("modules");
    m.write_strings("path", r.modules.path, row);
    m.write_strings("type", r.modules.type, row);
    m.write_ints("parent", r.modules.parent, h5::DatasetMeta{"module index", {"module"}});

    auto p = topo.create_group("params");
    const auto& t = r.params;
    const std::size_t n = t.name.size();
    std::size_t maxdim = 0;
    for (const auto& s : t.shape) maxdim = std::max(maxdim, s.size());
    std::vector<std::int64_t> ndim, shape(n * maxdim, 0);
    for (std::size_t i = 0; i < n; ++i) {
      ndim.push_back(static_cast<std::int64_t>(t.shape.at(i).size()));
      std::copy(t.shape[i].begin(), t.shape[i].end(), shape.begin() + i * maxdim);
    }
    const h5::DatasetMeta param{"", {"parameter"}};
    p.write_strings("name", t.name, param);
    p.write_ints("ndim", ndim, h5::DatasetMeta{"dimensions", {"parameter"}});
    p.write_ints("shape", shape, dims2(n, maxdim),
                 h5::DatasetMeta{"elements", {"parameter", "dimension"}});
    p.write_strings("dtype", t.dtype, param);
    p.write_ints("dedicated", t.dedicated, h5::DatasetMeta{"boolean", {"parameter"}});
    p.write_ints("owner_rank", t.owner_rank, h5::DatasetMeta{"rank", {"parameter"}});
    p.write_ints("site", t.site, h5::DatasetMeta{"site index", {"parameter"}});
    p.write_ints("cost", t.cost, h5::DatasetMeta{"cost units", {"parameter"}});
    if (!t.tp_shard_dim.empty()) {
      p.write_ints("tp_shard_dim", t.tp_shard_dim, h5::DatasetMeta{"dimension", {"parameter"}});
      p.write_ints("tp_local_numel", t.tp_local_numel, h5::DatasetMeta{"elements", {"parameter"}});
    }
  }
  {
    auto b = g.create_group("boundary");
    b.write_attr("spec", r.boundary_spec);
    b.write_attr("label", r.boundary_label);
    b.write_attr("strict", static_cast<std::int64_t>(r.strict ? 1 : 0));
    b.write_attr("suggested_boundary", r.suggested_boundary);
    b.write_strings("warnings", r.boundary_warnings, h5::DatasetMeta{"", {"finding"}});
    auto s = b.create_group("sites");
    const h5::DatasetMeta site{"", {"site"}};
    s.write_strings("path", r.sites.path, site);
    s.write_strings("type", r.sites.type, site);
    s.write_ints("param_count", r.sites.param_count, h5::DatasetMeta{"parameters", {"site"}});
    s.write_ints("numel", r.sites.numel, h5::DatasetMeta{"elements", {"site"}});
    s.write_ints("bytes", r.sites.bytes, h5::DatasetMeta{"B", {"site"}});
    std::vector<std::int64_t> count, flat;
    for (const auto& o : r.sites.owners) {
      count.push_back(static_cast<std::int64_t>(o.size()));
      flat.insert(flat.end(), o.begin(), o.end());
    }
    s.write_ints("owner_count", count, h5::DatasetMeta{"ranks", {"site"}});
    s.write_ints("owners", flat, h5::DatasetMeta{"rank", {"site owner (flattened)"}});
  }
  {
    const auto& q = r.partition;
    auto p = g.create_group("partition");
    p.write_attr("strategy", q.strategy);
    p.write_attr("cost_model", q.cost_model);
    p.write_attr("shard", q.shard);
    p.write_attr("replicate", q.replicate);
    p.write_attr("num_units", q.num_units);
    p.write_attr("packed_units", q.packed_units);
    p.write_attr("total_cost", q.total_cost);
    p.write_attr("makespan", q.makespan);
    p.write_attr("lower_bound", q.lower_bound);
    p.write_attr("ratio", q.ratio);
    p.write_attr("imbalance_all", q.imbalance_all);
    p.write_attr("imbalance_nonempty", q.imbalance_nonempty);
    p.write_attr("empty_slots", q.empty_slots);
    p.write_attr("key_collisions", q.key_collisions);
    p.write_ints("slot_rank", q.slot_rank, h5::DatasetMeta{"rank", {"slot"}});
    p.write_ints("numel_loads", q.numel_loads, h5::DatasetMeta{"elements", {"slot"}});
    p.write_ints("cost_loads", q.cost_loads, h5::DatasetMeta{"cost units", {"slot"}});
  }
  {
    const auto& t = r.timings;
    const std::size_t expect = static_cast<std::size_t>(t.steps * t.ranks) * t.phases.size();
    if (t.seconds.size() != expect)
      throw RuntimeFailure(
          fmt::format("run timings hold {} values, expected steps {} x ranks {} x phases {}",
                      t.seconds.size(), t.steps, t.ranks, t.phases.size()));
    if (!t.step_seconds.empty() &&
        t.step_seconds.size() != static_cast<std::size_t>(t.steps * t.ranks))
      throw RuntimeFailure(
          fmt::format("run step times hold {} values, expected steps {} x ranks {}",
                      t.step_seconds.size(), t.steps, t.ranks));
    auto tg = g.create_group("timings");
    tg.write_attr("repeats", t.repeats);
    tg.write_attr("steps_per_repeat", t.repeats > 0 ? t.steps / t.repeats : t.steps);
    tg.write_strings("phases", t.phases, h5::DatasetMeta{"", {"phase"}});
    tg.write_doubles("seconds", t.seconds,
                     {static_cast<hsize_t>(t.steps), static_cast<hsize_t>(t.ranks),
                      static_cast<hsize_t>(t.phases.size())},
                     {"s", {"sample", "rank", "phase"}});
    if (t.step_seconds.size() == static_cast<std::size_t>(t.steps * t.ranks))
      tg.write_doubles("step_seconds", t.step_seconds,
                       {static_cast<hsize_t>(t.steps), static_cast<hsize_t>(t.ranks)},
                       {"s", {"sample", "rank"}});
  }
  {
    const auto& c = r.collectives;
    const std::size_t expect = c.kinds.size() * static_cast<std::size_t>(c.ranks);
    for (const auto* v :
         {&c.calls_per_step, &c.bytes_per_rank_per_step, &c.formula_bytes_per_rank_per_step})
      if (v->size() != expect)
        throw RuntimeFailure(
            fmt::format("run collectives hold {} values, expected kinds {} x ranks {}", v->size(),
                        c.kinds.size(), c.ranks));
    auto cg = g.create_group("collectives");
    cg.write_strings("kinds", c.kinds, h5::DatasetMeta{"", {"kind"}});
    const auto dims = dims2(c.kinds.size(), static_cast<std::size_t>(c.ranks));
    cg.write_ints("calls_per_step", c.calls_per_step, dims,
                  h5::DatasetMeta{"calls/step", {"kind", "rank"}});
    cg.write_ints("bytes_per_rank_per_step", c.bytes_per_rank_per_step, dims,
                  {"B/step", {"kind", "rank"}});
    cg.write_ints("formula_bytes_per_rank_per_step", c.formula_bytes_per_rank_per_step, dims,
                  {"B/step", {"kind", "rank"}});
    if (!c.in_flight_seconds.empty()) {
      const std::size_t nk = c.kinds.size();
      if (c.message_bytes_per_step.size() != nk || c.group_size.size() != nk ||
          c.in_flight_seconds.size() != nk)
        throw RuntimeFailure(fmt::format("run collectives: bandwidth figures for {} kinds", nk));
      cg.write_doubles("message_bytes_per_step", c.message_bytes_per_step,
                       h5::DatasetMeta{"B/step", {"kind"}});
      cg.write_ints("group_size", c.group_size, h5::DatasetMeta{"ranks", {"kind"}});
      cg.write_doubles("in_flight_seconds", c.in_flight_seconds, h5::DatasetMeta{"s", {"kind"}});
      // Derived, for readers that want the nccl-tests columns directly.
      std::vector<double> algbw, busbw;
      for (std::size_t k = 0; k < nk; ++k) {
        const double a = c.in_flight_seconds[k] > 0
                             ? c.message_bytes_per_step[k] / c.in_flight_seconds[k] / 1e9
                             : std::numeric_limits<double>::quiet_NaN();
        algbw.push_back(a);
        busbw.push_back(a * bus_factor(c.kinds[k], static_cast<int>(c.group_size[k])));
      }
      cg.write_doubles("algbw", algbw, h5::DatasetMeta{"GB/s", {"kind"}});
      cg.write_doubles("busbw", busbw, h5::DatasetMeta{"GB/s", {"kind"}});
    }
  }
  {
    auto mg = g.create_group("memory");
    std::vector<std::string> names;
    std::vector<std::int64_t> bytes;
    for (const auto& [k, v] : r.memory) {
      names.push_back(k);
      bytes.push_back(v);
    }
    mg.write_strings("name", names, h5::DatasetMeta{"", {"figure"}});
    mg.write_ints("bytes", bytes, h5::DatasetMeta{"B", {"figure"}});
  }
  {
    auto sg = g.create_group("summary");
    for (const auto& [k, v] : r.summary) {
      // Counts, bytes and 0/1 verdicts are integers (int64), everything else float64.
      if (is_count_summary(k) && std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9e15)
        sg.write_attr(k, static_cast<std::int64_t>(v));
      else
        sg.write_attr(k, v);
    }
    for (const auto& [k, v] : r.summary_text) {
      if (r.summary.count(k))
        throw RuntimeFailure(fmt::format("summary key '{}' is both numeric and text", k));
      sg.write_attr(k, v);
    }
  }
}

}  // namespace

void write_results(const std::string& path, const ResultsFile& file) {
  auto f = h5::File::create(path);
  write_provenance(f, file.provenance, file.runs.size());
  auto runs = f.create_group("runs");
  for (std::size_t i = 0; i < file.runs.size(); ++i) {
    auto g = runs.create_group(std::to_string(i));
    write_run(g, file.runs[i]);
  }
  f.commit();
}

void check_output_writable(const std::string& path) {
  // HDF5 needs a file it can seek in, and the rename of a temporary onto a device or pipe
  // would replace the node itself.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
    throw InputError(
        fmt::format("cannot write results to '{}': not a regular file (HDF5 needs one)", path));
  check_writable(path, "results to");
}

}  // namespace dmuon::results
