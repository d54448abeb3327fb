#pragma once
// Every member of a ResultsFile as text, one "name = value" line each, written out by hand
// (never from the schema's field tables): the independent side of the file-compatibility test,
// which compares what the reader makes of a file written by an older build with what the
// reader of that build made of it.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "dmuon/results/run_record.hpp"

namespace dmuon::results::fixture {

class RecordDump {
 public:
  // Doubles at full precision (17 significant digits) so a changed bit shows.
  void line(const std::string& name, double v) {
    out_ << name << " = " << (std::isnan(v) ? std::string("nan") : fmt::format("{:.17g}", v))
         << "\n";
  }
  void line(const std::string& name, std::int64_t v) { out_ << name << " = " << v << "\n"; }
  void line(const std::string& name, bool v) { out_ << name << " = " << (v ? 1 : 0) << "\n"; }
  void line(const std::string& name, const std::string& v) {
    out_ << name << " = \"" << v << "\"\n";
  }
  void line(const std::string& name, const std::vector<std::string>& v) {
    out_ << name << " = [";
    for (std::size_t i = 0; i < v.size(); ++i) out_ << (i ? ", " : "") << '"' << v[i] << '"';
    out_ << "]\n";
  }
  void line(const std::string& name, const std::vector<std::int64_t>& v) {
    out_ << name << " = [" << fmt::format("{}", fmt::join(v, ", ")) << "]\n";
  }
  void line(const std::string& name, const std::vector<double>& v) {
    out_ << name << " = [";
    for (std::size_t i = 0; i < v.size(); ++i)
      out_ << (i ? ", " : "") << (std::isnan(v[i]) ? "nan" : fmt::format("{:.17g}", v[i]));
    out_ << "]\n";
  }
  void line(const std::string& name, const std::vector<std::vector<std::int64_t>>& v) {
    for (std::size_t i = 0; i < v.size(); ++i) line(fmt::format("{}[{}]", name, i), v[i]);
  }
  template <typename V>
  void line(const std::string& name, const std::map<std::string, V>& m) {
    for (const auto& [k, v] : m) line(name + "." + k, v);
  }
  std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
};

inline void dump_provenance(RecordDump& d, const dmuon::results::Provenance& p) {
  d.line("schema_version", p.schema_version);
  d.line("suite_version", p.suite_version);
  d.line("git_commit", p.git_commit);
  d.line("build_type", p.build_type);
  d.line("compiler", p.compiler);
  d.line("mpi_version", p.mpi_version);
  d.line("kokkos_version", p.kokkos_version);
  d.line("hdf5_version", p.hdf5_version);
  d.line("cuda_version", p.cuda_version);
  d.line("nccl_version", p.nccl_version);
  d.line("hostnames", p.hostnames);
  d.line("device", p.device);
  d.line("device_model", p.device_model);
  d.line("cpu_features", p.cpu_features);
  d.line("blas_library", p.blas_library);
  d.line("blas_core", p.blas_core);
  d.line("sgemm_gflops", p.sgemm_gflops);
  d.line("sgemm_size", p.sgemm_size);
  d.line("scheduler_job", p.scheduler_job);
  d.line("transport_settings", p.transport_settings);
  d.line("date_utc", p.date_utc);
  d.line("command_line", p.command_line);
  d.line("world_size", p.world_size);
  d.line("replicate", p.replicate);
}

inline void dump_run_inputs(RecordDump& d, const dmuon::results::RunRecord& r) {
  d.line("status", r.status);
  d.line("error", r.error);
  d.line("config_text", r.config_text);
  d.line("topology", r.topology);
  d.line("preset", r.preset);
  d.line("dedicate_rule", r.dedicate_rule);
  d.line("boundary_spec", r.boundary_spec);
  d.line("boundary_label", r.boundary_label);
  d.line("strict", r.strict);
  d.line("boundary_warnings", r.boundary_warnings);
  d.line("suggested_boundary", r.suggested_boundary);
  d.line("method", r.method);
  d.line("reshard", r.reshard);
  d.line("grad_reduce", r.grad_reduce);
  d.line("prefetch", r.prefetch);
  d.line("device", r.device);
  d.line("comm_dtype", r.comm_dtype);
  d.line("ns", r.ns);
  d.line("ns_dtype", r.ns_dtype);
  d.line("optimizer_pipeline", r.optimizer_pipeline);
  d.line("clip_norm", r.clip_norm);
  d.line("accum", r.accum);
  d.line("world_size", r.world_size);
  d.line("replicate", r.replicate);
  d.line("tp", r.tp);
  d.line("compute", r.compute);
  d.line("global_samples", r.global_samples);
  d.line("steps", r.steps);
  d.line("warmup", r.warmup);
  d.line("seed", r.seed);
  d.line("sets", r.sets);
  d.line("plan_options", r.plan_options);
}

inline void dump_run_tables(RecordDump& d, const dmuon::results::RunRecord& r) {
  d.line("modules.path", r.modules.path);
  d.line("modules.type", r.modules.type);
  d.line("modules.parent", r.modules.parent);
  const auto& p = r.params;
  d.line("params.name", p.name);
  d.line("params.shape", p.shape);
  d.line("params.dtype", p.dtype);
  d.line("params.dedicated", p.dedicated);
  d.line("params.owner_rank", p.owner_rank);
  d.line("params.site", p.site);
  d.line("params.cost", p.cost);
  d.line("params.tp_shard_dim", p.tp_shard_dim);
  d.line("params.tp_local_numel", p.tp_local_numel);
  const auto& s = r.sites;
  d.line("sites.path", s.path);
  d.line("sites.type", s.type);
  d.line("sites.param_count", s.param_count);
  d.line("sites.numel", s.numel);
  d.line("sites.bytes", s.bytes);
  d.line("sites.owners", s.owners);
}

inline void dump_partition(RecordDump& d, const dmuon::results::PartitionRecord& q) {
  d.line("partition.strategy", q.strategy);
  d.line("partition.cost_model", q.cost_model);
  d.line("partition.shard", q.shard);
  d.line("partition.replicate", q.replicate);
  d.line("partition.slot_rank", q.slot_rank);
  d.line("partition.numel_loads", q.numel_loads);
  d.line("partition.cost_loads", q.cost_loads);
  d.line("partition.num_units", q.num_units);
  d.line("partition.packed_units", q.packed_units);
  d.line("partition.total_cost", q.total_cost);
  d.line("partition.makespan", q.makespan);
  d.line("partition.lower_bound", q.lower_bound);
  d.line("partition.ratio", q.ratio);
  d.line("partition.imbalance_all", q.imbalance_all);
  d.line("partition.imbalance_nonempty", q.imbalance_nonempty);
  d.line("partition.empty_slots", q.empty_slots);
  d.line("partition.key_collisions", q.key_collisions);
}

inline void dump_measured(RecordDump& d, const dmuon::results::RunRecord& r) {
  const auto& t = r.timings;
  d.line("timings.phases", t.phases);
  d.line("timings.steps", t.steps);
  d.line("timings.ranks", t.ranks);
  d.line("timings.seconds", t.seconds);
  d.line("timings.step_seconds", t.step_seconds);
  d.line("timings.repeats", t.repeats);
  const auto& c = r.collectives;
  d.line("collectives.kinds", c.kinds);
  d.line("collectives.ranks", c.ranks);
  d.line("collectives.calls_per_step", c.calls_per_step);
  d.line("collectives.bytes_per_rank_per_step", c.bytes_per_rank_per_step);
  d.line("collectives.formula_bytes_per_rank_per_step", c.formula_bytes_per_rank_per_step);
  d.line("collectives.message_bytes_per_step", c.message_bytes_per_step);
  d.line("collectives.group_size", c.group_size);
  d.line("collectives.in_flight_seconds", c.in_flight_seconds);
  d.line("memory", r.memory);
  d.line("summary", r.summary);
  d.line("summary_text", r.summary_text);
}

/// The whole file as text.
inline std::string dump_results(const dmuon::results::ResultsFile& f) {
  RecordDump d;
  dump_provenance(d, f.provenance);
  for (std::size_t i = 0; i < f.runs.size(); ++i) {
    d.line("run", static_cast<std::int64_t>(i));
    dump_run_inputs(d, f.runs[i]);
    dump_run_tables(d, f.runs[i]);
    dump_partition(d, f.runs[i].partition);
    dump_measured(d, f.runs[i]);
  }
  return d.text();
}

}  // namespace dmuon::results::fixture
