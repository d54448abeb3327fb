#include "dmuon/results/record_schema.hpp"

#include <fmt/format.h>

namespace dmuon::results {
namespace {

// Accessors: a member of the record, or of one of its sections.
template <auto Member>
FieldRef run(RunRecord& r) {
  return &(r.*Member);
}
template <auto Member>
FieldRef part(RunRecord& r) {
  return &(r.partition.*Member);
}
template <auto Member>
FieldRef prov(Provenance& p) {
  return &(p.*Member);
}
template <typename Table, auto Member>
ColumnRef col(Table& t) {
  return &(t.*Member);
}

// "key: value" of the run's `config` text (the YAML dmuon_bench wrote), "" when absent: the
// inputs schema-1 files kept only there.
std::string config_value(const std::string& config, const std::string& key) {
  std::size_t pos = 0;
  while (pos < config.size()) {
    const auto end = config.find('\n', pos);
    const std::string line = config.substr(pos, end == std::string::npos ? end : end - pos);
    if (line.rfind(key + ": ", 0) == 0) return line.substr(key.size() + 2);
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return "";
}

std::int64_t to_int(const std::string& s, std::int64_t fallback) {
  if (s.empty()) return fallback;
  try {
    std::size_t used = 0;
    const long long v = std::stoll(s, &used);
    return used == s.size() ? v : fallback;
  } catch (const std::exception&) {
    return fallback;
  }
}

// Before --reduce-dtype the one wire type carried the gradients too.
void reduce_dtype_from_comm(RunRecord& r) {
  r.reduce_dtype = r.comm_dtype;
}

// Schema 1: the run inputs live in the config text only.
void compute_from_config(RunRecord& r) {
  const std::string compute = config_value(r.config_text, "compute");
  r.compute = compute.empty() ? "gemm" : compute;
}
void global_samples_from_config(RunRecord& r) {
  const auto global = to_int(config_value(r.config_text, "global_tokens"), 0);
  const auto tokens = to_int(config_value(r.config_text, "tokens"), 0);
  // (A replicate below 1 is refused right after, by the reader's layout check.)
  const auto groups = r.replicate > 0 ? r.world_size / r.replicate : 0;
  r.global_samples = global > 0 ? global : tokens * groups;
}
void steps_from_config(RunRecord& r) {
  r.steps = to_int(config_value(r.config_text, "steps"), 0);
}
void warmup_from_config(RunRecord& r) {
  r.warmup = to_int(config_value(r.config_text, "warmup"), -1);
}
void seed_from_config(RunRecord& r) {
  r.seed = to_int(config_value(r.config_text, "seed"), -1);
}

// Files written before the option table kept a projection's machine in the summary only.
void run_options_before_table(RunRecord& r) {
  r.run_options.clear();
  const auto m = r.summary_text.find("machine");
  if (m != r.summary_text.end() && !m->second.empty()) r.run_options = "machine=" + m->second;
}

std::string boundary_key(const RunRecord& r) {
  return r.boundary_spec.empty()
             ? "-"
             : fmt::format("{} ({})", r.boundary_spec, r.strict ? "strict" : "lenient");
}
std::string ns_key(const RunRecord& r) {
  return r.ns + "/" + r.ns_dtype;
}

constexpr Absent kReq = Absent::required;
constexpr Absent kOpt = Absent::optional;
constexpr Absent kImplied = Absent::implied;
constexpr KeyText kPlain = KeyText::plain;
constexpr KeyText kDash = KeyText::dash_if_empty;
constexpr KeyText kUnknown = KeyText::unknown_if_default;

}  // namespace

const std::vector<Field<Provenance>>& provenance_fields() {
  using P = Provenance;
  static const std::vector<Field<P>> fields = {
      {"", "schema_version", prov<&P::schema_version>},
      {"", "suite_version", prov<&P::suite_version>},
      {"", "git_commit", prov<&P::git_commit>},
      {"", "build_type", prov<&P::build_type>},
      {"", "compiler", prov<&P::compiler>},
      {"", "mpi_version", prov<&P::mpi_version>},
      {"", "kokkos_version", prov<&P::kokkos_version>},
      {"", "hdf5_version", prov<&P::hdf5_version>},
      {"", "cuda_version", prov<&P::cuda_version>},
      {"", "nccl_version", prov<&P::nccl_version>},
      {"", "hostnames", prov<&P::hostnames>},
      // The hardware provenance (schema 2).
      {"", "device", prov<&P::device>, kOpt},
      {"", "device_model", prov<&P::device_model>, kOpt},
      {"", "cpu_features", prov<&P::cpu_features>, kOpt},
      {"", "blas_library", prov<&P::blas_library>, kOpt},
      {"", "blas_core", prov<&P::blas_core>, kOpt},
      {"", "sgemm_gflops", prov<&P::sgemm_gflops>, kOpt},
      {"", "sgemm_size", prov<&P::sgemm_size>, kOpt},
      {"", "scheduler_job", prov<&P::scheduler_job>, kOpt},
      {"", "transport_settings", prov<&P::transport_settings>, kOpt},
      {"", "date_utc", prov<&P::date_utc>},
      {"", "command_line", prov<&P::command_line>},
      {"", "world_size", prov<&P::world_size>},
      {"", "replicate", prov<&P::replicate>},
  };
  return fields;
}

const std::vector<Field<RunRecord>>& run_fields() {
  using R = RunRecord;
  using Q = PartitionRecord;
  // Optional fields were added after the first files: absent means what the engine then did
  // (the record's default), or what a schema-1 file kept in its config text.
  static const std::vector<Field<R>> fields = {
      {"", "status", run<&R::status>},
      {"", "error", run<&R::error>},
      {"", "config", run<&R::config_text>},
      // The match key, in its order.
      {"", "topology", run<&R::topology>, kReq, nullptr, "topology"},
      {"", "preset", run<&R::preset>, kReq, nullptr, "preset", kDash},
      {"", "sets", run<&R::sets>, kOpt, nullptr, "set", kDash},
      {"", "dedicate_rule", run<&R::dedicate_rule>, kReq, nullptr, "dedicate", kDash},
      {"boundary", "spec", run<&R::boundary_spec>, kReq, nullptr, "boundary", kPlain, boundary_key},
      {"", "method", run<&R::method>, kReq, nullptr, "method"},
      {"partition", "strategy", part<&Q::strategy>, kReq, nullptr, "owners", kDash},
      {"partition", "cost_model", part<&Q::cost_model>, kReq, nullptr, "cost", kDash},
      {"", "plan_options", run<&R::plan_options>, kOpt, nullptr, "plan", kDash},
      {"", "run_options", run<&R::run_options>, kImplied, run_options_before_table, "options",
       kDash},
      {"", "reshard", run<&R::reshard>, kReq, nullptr, "reshard"},
      {"", "grad_reduce", run<&R::grad_reduce>, kOpt, nullptr, "grad_reduce"},
      {"", "prefetch", run<&R::prefetch>, kOpt, nullptr, "prefetch"},
      {"", "device", run<&R::device>, kOpt, nullptr, "device"},
      {"", "comm_dtype", run<&R::comm_dtype>, kOpt, nullptr, "comm"},
      {"", "reduce_dtype", run<&R::reduce_dtype>, kImplied, reduce_dtype_from_comm, "reduce"},
      {"", "ns", run<&R::ns>, kOpt, nullptr, "ns", kPlain, ns_key},
      {"", "optimizer_pipeline", run<&R::optimizer_pipeline>, kOpt, nullptr, "pipeline"},
      {"", "clip_norm", run<&R::clip_norm>, kOpt, nullptr, "clip"},
      {"", "accum", run<&R::accum>, kOpt, nullptr, "accum"},
      {"", "compute", run<&R::compute>, kOpt, compute_from_config, "compute"},
      {"", "global_samples", run<&R::global_samples>, kOpt, global_samples_from_config, "batch",
       kUnknown},
      {"", "steps", run<&R::steps>, kOpt, steps_from_config, "steps", kUnknown},
      {"", "warmup", run<&R::warmup>, kOpt, warmup_from_config, "warmup", kUnknown},
      {"", "seed", run<&R::seed>, kOpt, seed_from_config, "seed", kUnknown},
      {"", "world_size", run<&R::world_size>, kReq, nullptr, "world"},
      {"", "replicate", run<&R::replicate>, kReq, nullptr, "R"},
      {"", "tp", run<&R::tp>, kOpt, nullptr, "T"},
      // Not in the key (the key's ns and boundary texts include ns_dtype and strict).
      {"", "ns_dtype", run<&R::ns_dtype>, kOpt},
      {"boundary", "label", run<&R::boundary_label>},
      {"boundary", "strict", run<&R::strict>},
      {"boundary", "suggested_boundary", run<&R::suggested_boundary>},
      {"partition", "shard", part<&Q::shard>},
      {"partition", "replicate", part<&Q::replicate>},
      {"partition", "num_units", part<&Q::num_units>},
      {"partition", "packed_units", part<&Q::packed_units>},
      {"partition", "total_cost", part<&Q::total_cost>},
      {"partition", "makespan", part<&Q::makespan>},
      {"partition", "lower_bound", part<&Q::lower_bound>},
      {"partition", "ratio", part<&Q::ratio>},
      {"partition", "imbalance_all", part<&Q::imbalance_all>},
      {"partition", "imbalance_nonempty", part<&Q::imbalance_nonempty>},
      {"partition", "empty_slots", part<&Q::empty_slots>},
      {"partition", "key_collisions", part<&Q::key_collisions>},
  };
  return fields;
}

std::string key_text(const Field<RunRecord>& f, const RunRecord& r) {
  if (f.key_value) return f.key_value(r);
  static const RunRecord defaults;
  const FieldRef value = field_ref(f, r);
  const FieldRef unknown = field_ref(f, defaults);
  if (const auto* s = std::get_if<std::string*>(&value))
    return f.key_text == KeyText::dash_if_empty && (*s)->empty() ? "-" : **s;
  if (const auto* i = std::get_if<std::int64_t*>(&value))
    return f.key_text == KeyText::unknown_if_default && **i == *std::get<std::int64_t*>(unknown)
               ? "?"
               : std::to_string(**i);
  if (const auto* b = std::get_if<bool*>(&value)) return **b ? "1" : "0";
  return fmt::format("{}", *std::get<double*>(value));
}

const std::vector<Column<ModuleTable>>& module_columns() {
  using M = ModuleTable;
  static const std::vector<Column<M>> columns = {
      {"path", col<M, &M::path>, "", "module"},
      {"type", col<M, &M::type>, "", "module"},
      {"parent", col<M, &M::parent>, "module index", "module"},
  };
  return columns;
}

const std::vector<Column<ParamTable>>& param_columns() {
  using P = ParamTable;
  static const std::vector<Column<P>> columns = {
      {"name", col<P, &P::name>, "", "parameter"},
      {"dtype", col<P, &P::dtype>, "", "parameter"},
      {"dedicated", col<P, &P::dedicated>, "boolean", "parameter"},
      {"owner_rank", col<P, &P::owner_rank>, "rank", "parameter"},
      {"site", col<P, &P::site>, "site index", "parameter"},
      {"cost", col<P, &P::cost>, "cost units", "parameter"},
      // Tensor parallelism (tp > 1 only).
      {"tp_shard_dim", col<P, &P::tp_shard_dim>, "dimension", "parameter", true},
      {"tp_local_numel", col<P, &P::tp_local_numel>, "elements", "parameter", true},
  };
  return columns;
}

const std::vector<Column<SiteTable>>& site_columns() {
  using S = SiteTable;
  static const std::vector<Column<S>> columns = {
      {"path", col<S, &S::path>, "", "site"},
      {"type", col<S, &S::type>, "", "site"},
      {"param_count", col<S, &S::param_count>, "parameters", "site"},
      {"numel", col<S, &S::numel>, "elements", "site"},
      {"bytes", col<S, &S::bytes>, "B", "site"},
  };
  return columns;
}

const std::vector<Column<PartitionRecord>>& slot_columns() {
  using Q = PartitionRecord;
  static const std::vector<Column<Q>> columns = {
      {"slot_rank", col<Q, &Q::slot_rank>, "rank", "slot"},
      {"numel_loads", col<Q, &Q::numel_loads>, "elements", "slot"},
      {"cost_loads", col<Q, &Q::cost_loads>, "cost units", "slot"},
  };
  return columns;
}

}  // namespace dmuon::results
