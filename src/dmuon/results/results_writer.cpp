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
#include "dmuon/results/channel.hpp"
#include "dmuon/results/h5.hpp"
#include "dmuon/results/schema_h5.hpp"
#include "dmuon/results/summary.hpp"

namespace dmuon::results {
namespace {

// The nccl-tests bus factor of a stored channel name; NaN for a name no channel has.
double bus_factor(const std::string& channel_name, int n) {
  const auto channel = parse_channel(channel_name);
  return channel ? comm::busbw_factor(channel->kind, n) : std::numeric_limits<double>::quiet_NaN();
}

std::vector<hsize_t> dims2(std::size_t a, std::size_t b) {
  return {static_cast<hsize_t>(a), static_cast<hsize_t>(b)};
}

void write_provenance(h5::Group& root, const Provenance& p, std::size_t runs) {
  root.write_attr("format", kFormatName);
  write_fields(root, provenance_fields(), p, "");
  root.write_attr("num_runs", static_cast<std::int64_t>(runs));
}

// Parameters: the columns, and each shape as a row of an n x maxdim array padded with 0.
void write_params(h5::Group& p, const ParamTable& t) {
  const std::size_t n = t.name.size();
  std::size_t maxdim = 0;
  for (const auto& s : t.shape) maxdim = std::max(maxdim, s.size());
  std::vector<std::int64_t> ndim, shape(n * maxdim, 0);
  for (std::size_t i = 0; i < n; ++i) {
    ndim.push_back(static_cast<std::int64_t>(t.shape.at(i).size()));
    std::copy(t.shape[i].begin(), t.shape[i].end(), shape.begin() + i * maxdim);
  }
  write_columns(p, param_columns(), t);
  p.write_ints("ndim", ndim, h5::DatasetMeta{"dimensions", {"parameter"}});
  p.write_ints("shape", shape, dims2(n, maxdim),
               h5::DatasetMeta{"elements", {"parameter", "dimension"}});
}

void write_topology(h5::Group& g, const RunRecord& r) {
  auto topo = g.create_group("topology");
  auto m = topo.create_group("modules");
  write_columns(m, module_columns(), r.modules);
  auto p = topo.create_group("params");
  write_params(p, r.params);
}

// Boundary attributes, warnings and the hook sites with their (ragged, flattened) owner lists.
void write_boundary(h5::Group& g, const RunRecord& r) {
  auto b = g.create_group("boundary");
  write_fields(b, run_fields(), r, "boundary");
  b.write_strings("warnings", r.boundary_warnings, h5::DatasetMeta{"", {"finding"}});
  auto s = b.create_group("sites");
  write_columns(s, site_columns(), r.sites);
  std::vector<std::int64_t> count, flat;
  for (const auto& o : r.sites.owners) {
    count.push_back(static_cast<std::int64_t>(o.size()));
    flat.insert(flat.end(), o.begin(), o.end());
  }
  s.write_ints("owner_count", count, h5::DatasetMeta{"ranks", {"site"}});
  s.write_ints("owners", flat, h5::DatasetMeta{"rank", {"site owner (flattened)"}});
}

void write_partition(h5::Group& g, const RunRecord& r) {
  auto p = g.create_group("partition");
  write_fields(p, run_fields(), r, "partition");
  write_columns(p, slot_columns(), r.partition);
}

void check_timings(const Timings& t) {
  const std::size_t expect = static_cast<std::size_t>(t.steps * t.ranks) * t.phases.size();
  if (t.seconds.size() != expect)
    throw RuntimeFailure(
        fmt::format("run timings hold {} values, expected steps {} x ranks {} x phases {}",
                    t.seconds.size(), t.steps, t.ranks, t.phases.size()));
  if (!t.step_seconds.empty() &&
      t.step_seconds.size() != static_cast<std::size_t>(t.steps * t.ranks))
    throw RuntimeFailure(fmt::format("run step times hold {} values, expected steps {} x ranks {}",
                                     t.step_seconds.size(), t.steps, t.ranks));
}

void write_timings(h5::Group& g, const Timings& t) {
  check_timings(t);
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

// Per channel: message bytes, group size and in-flight time, and the nccl-tests columns
// derived from them (algbw, busbw) for readers that want them directly.
void write_bandwidths(h5::Group& cg, const Collectives& c) {
  const std::size_t nk = c.kinds.size();
  if (c.message_bytes_per_step.size() != nk || c.group_size.size() != nk ||
      c.in_flight_seconds.size() != nk)
    throw RuntimeFailure(fmt::format("run collectives: bandwidth figures for {} kinds", nk));
  cg.write_doubles("message_bytes_per_step", c.message_bytes_per_step,
                   h5::DatasetMeta{"B/step", {"kind"}});
  cg.write_ints("group_size", c.group_size, h5::DatasetMeta{"ranks", {"kind"}});
  cg.write_doubles("in_flight_seconds", c.in_flight_seconds, h5::DatasetMeta{"s", {"kind"}});
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

void write_collectives(h5::Group& g, const Collectives& c) {
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
  if (!c.in_flight_seconds.empty()) write_bandwidths(cg, c);
}

void write_memory(h5::Group& g, const std::map<std::string, std::int64_t>& memory) {
  auto mg = g.create_group("memory");
  std::vector<std::string> names;
  std::vector<std::int64_t> bytes;
  for (const auto& [k, v] : memory) {
    names.push_back(k);
    bytes.push_back(v);
  }
  mg.write_strings("name", names, h5::DatasetMeta{"", {"figure"}});
  mg.write_ints("bytes", bytes, h5::DatasetMeta{"B", {"figure"}});
}

void write_summary(h5::Group& g, const RunRecord& r) {
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

void write_run(h5::Group& g, const RunRecord& r) {
  write_fields(g, run_fields(), r, "");
  write_topology(g, r);
  write_boundary(g, r);
  write_partition(g, r);
  write_timings(g, r.timings);
  write_collectives(g, r.collectives);
  write_memory(g, r.memory);
  write_summary(g, r);
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
