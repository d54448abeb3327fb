#pragma once
// The results data model: what one invocation of the benchmark records (provenance) and what
// each run inside it records (plan, timings, collectives, memory, summary). Plain data, written
// and read by results_writer.hpp / results_reader.hpp; the on-disk layout is documented in
// results/README.md.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dmuon::results {

/// Schema version written to every results file. Version 2 added per-sample step times, the
/// run inputs that change a number (compute, batch, steps, seed, plan options), units and
/// dimension labels, integer counts and the hardware provenance; readers accept 1 and 2.
inline constexpr const char* kSchemaVersion = "2";
/// Oldest schema version readers accept.
inline constexpr const char* kOldestSchemaVersion = "1";
/// Root attribute "format" identifying a dmuon results file.
inline constexpr const char* kFormatName = "dmuon-results";

/// Where and how the invocation ran (root attributes).
struct Provenance {
  std::string schema_version = kSchemaVersion;
  std::string suite_version;
  std::string git_commit;
  std::string build_type;
  std::string compiler;
  std::string mpi_version;  ///< MPI_Get_library_version (first line), "n/a" without MPI
  std::string kokkos_version;
  std::string hdf5_version;  ///< run-time H5get_libversion
  std::string cuda_version;  ///< "n/a" when not built with CUDA
  std::string nccl_version;  ///< "n/a" when not built with NCCL
  std::vector<std::string> hostnames;
  // Hardware and the software that ran the compute (schema 2; "" when read from older files).
  std::string device;           ///< "host" | "cuda"
  std::string device_model;     ///< CPU model name (host) or GPU name (cuda)
  std::string cpu_features;     ///< e.g. "avx2,avx512f" (x86), "" elsewhere
  std::string blas_library;     ///< openblas_get_config(), or "unknown"
  std::string blas_core;        ///< openblas_get_corename(): the kernels OpenBLAS runs
  double sgemm_gflops = 0;      ///< sgemm rate measured at start (median over ranks), 0 = none
  std::int64_t sgemm_size = 0;  ///< n of the n x n x n sgemm measured
  /// The batch job that ran it ("slurm 123456 nodes node[01-16]"), "" outside a scheduler.
  std::string scheduler_job;
  /// The MPI / NCCL transport environment at start (transport_settings()), "" when none is set
  /// or the file predates it.
  std::string transport_settings;
  std::string date_utc;      ///< ISO-8601, e.g. 2026-11-29T09:07:22Z
  std::string command_line;  ///< shell-quoted argv
  std::int64_t world_size = 1;
  std::int64_t replicate = 1;
};

/// Module tree (parallel columns, module index order; parent -1 for the root).
struct ModuleTable {
  std::vector<std::string> path;
  std::vector<std::string> type;
  std::vector<std::int64_t> parent;
};

/// Parameters (parallel columns, parameter id order).
struct ParamTable {
  std::vector<std::string> name;
  std::vector<std::vector<std::int64_t>> shape;
  std::vector<std::string> dtype;
  std::vector<std::int64_t> dedicated;   ///< 1 dedicated (Muon on an owner), 0 otherwise
  std::vector<std::int64_t> owner_rank;  ///< world rank, -1 when not dedicated
  std::vector<std::int64_t> site;        ///< index into SiteTable, -1 when not dedicated
  std::vector<std::int64_t> cost;        ///< partition cost, 0 when not dedicated
  /// Tensor parallelism (RunRecord::tp > 1; empty otherwise and in older files): per parameter
  /// the TP shard dimension (-1 not TP-sharded, 0 column-parallel, 1 row-parallel) and the
  /// elements each rank holds (numel / T when TP-sharded, else numel).
  std::vector<std::int64_t> tp_shard_dim;
  std::vector<std::int64_t> tp_local_numel;
};

/// Hook sites in forward order (parallel columns).
struct SiteTable {
  std::vector<std::string> path;  ///< "" is the root
  std::vector<std::string> type;
  std::vector<std::int64_t> param_count;
  std::vector<std::int64_t> numel;
  std::vector<std::int64_t> bytes;
  std::vector<std::vector<std::int64_t>> owners;  ///< distinct owner ranks per site, ascending
};

/// Ownership partition quality (SPEC §5).
struct PartitionRecord {
  std::string strategy;
  std::string cost_model;
  std::int64_t shard = 1;
  std::int64_t replicate = 1;
  std::vector<std::int64_t> slot_rank;  ///< per slot (shard-major)
  std::vector<std::int64_t> numel_loads;
  std::vector<std::int64_t> cost_loads;
  std::int64_t num_units = 0;
  std::int64_t packed_units = 0;
  std::int64_t total_cost = 0;
  std::int64_t makespan = 0;
  double lower_bound = 0;
  double ratio = 0;
  double imbalance_all = 0;
  double imbalance_nonempty = 0;
  std::int64_t empty_slots = 0;
  std::int64_t key_collisions = 0;
};

/// Measured phase times: seconds[(step * ranks + rank) * phases.size() + phase]. A "step" here
/// is one sample: with --repeats R and --steps S there are R x S of them, repeat-major.
struct Timings {
  std::vector<std::string> phases;
  std::int64_t steps = 0;  ///< samples (repeats x measured steps per repeat)
  std::int64_t ranks = 0;
  std::vector<double> seconds;
  /// Wall time of each whole step per rank, [step * ranks + rank] (schema 2; empty in older
  /// files, where the step is the sum of the phases).
  std::vector<double> step_seconds;
  std::int64_t repeats = 1;  ///< engine runs the samples come from (each after its warm-up)
  double at(std::int64_t step, std::int64_t rank, std::size_t phase) const {
    return seconds[static_cast<std::size_t>((step * ranks + rank)) * phases.size() + phase];
  }
};

/// Per-step collectives per kind and rank: value[kind * ranks + rank].
struct Collectives {
  std::vector<std::string> kinds;
  std::int64_t ranks = 0;
  std::vector<std::int64_t> calls_per_step;
  std::vector<std::int64_t> bytes_per_rank_per_step;          ///< measured
  std::vector<std::int64_t> formula_bytes_per_rank_per_step;  ///< predicted (SPEC §6)
  /// Per kind (empty in files written before they existed): the bandwidth in the nccl-tests
  /// sense (comm/bus_bandwidth.hpp) — message bytes S per step, group size n, and the seconds
  /// per step one of the kind's collectives was in flight (NaN where not measured: CUDA).
  std::vector<double> message_bytes_per_step;
  std::vector<std::int64_t> group_size;
  std::vector<double> in_flight_seconds;
};

/// One run: one (topology, boundary, owner strategy, method, engine options) combination.
struct RunRecord {
  std::string status = "ok";  ///< "ok" | "rejected" (strict boundary failed at set-up) | "oom"
                              ///< (dmuon_project: over the device memory)
  std::string error;          ///< the set-up error when rejected
  std::string config_text;    ///< the resolved configuration (YAML/JSON text)

  std::string topology;
  std::string preset;
  std::string dedicate_rule;
  std::string boundary_spec;   ///< resolved spec ("types:A,B"), never an alias
  std::string boundary_label;  ///< e.g. "recommended", "types:A,B (strict)"
  bool strict = true;
  std::vector<std::string> boundary_warnings;  ///< degradation findings, one line each
  std::string suggested_boundary;
  std::string method = "dmuon";
  std::string reshard = "z3";
  std::string grad_reduce = "per-param";  ///< dmuon gradient reduces: "per-param" | "packed"
  std::int64_t prefetch = 0;              ///< weight-collective groups in flight ahead
  // Engine options that change the numbers. Files written before they existed read as what
  // the engine then did: host, fp32 on the wire, direct NS in fp32, all NS then publish.
  std::string device = "host";      ///< "host" | "cuda"
  std::string comm_dtype = "fp32";  ///< on the wire: "fp32" | "bf16"
  /// Gradients on the wire (--reduce-dtype); files written before it existed read as
  /// comm_dtype (their one wire type carried both).
  std::string reduce_dtype = "fp32";
  std::string ns = "direct";                            ///< Newton–Schulz form: "gram" | "direct"
  std::string ns_dtype = "fp32";                        ///< Newton–Schulz iterations (host: fp32)
  std::string optimizer_pipeline = "all-then-publish";  ///< "per-group" | "all-then-publish"
  /// Global-norm clipping: "none" or "<max_norm>:<2|inf>"; gradient accumulation micro-steps
  /// per step (timings are per step; per micro-step = step / accum). Older files: none, 1.
  std::string clip_norm = "none";
  std::int64_t accum = 1;
  std::int64_t world_size = 1;
  std::int64_t replicate = 1;
  /// T, the tensor-parallel group size: world = R x G x T (older files: 1). With T > 1 the
  /// collectives also hold the kinds tp_gather and tp_scatter.
  std::int64_t tp = 1;
  // Inputs that change the numbers (schema 2; older files: parsed from `config`, else these).
  std::string compute = "gemm";     ///< "gemm" | "none"
  std::int64_t global_samples = 0;  ///< global batch per step (0 = unknown)
  std::int64_t steps = 0;           ///< measured steps per repeat (0 = unknown)
  std::int64_t warmup = -1;         ///< warm-up steps per repeat (-1 = unknown)
  std::int64_t seed = -1;           ///< seed of the synthetic weights and data (-1 = unknown)
  std::string sets;                 ///< --set overrides of the topology, "K=V,..." ("" = none)
  /// The run key's fragments from the option table (docs/OPTIONS.md), "label=value" joined by
  /// spaces, each left out while it has the value files written before it existed mean:
  /// plan_options the plan's (packing, owners per group, column balance, routes, group key,
  /// TP rules), run_options the run's (seq_len, micro_batch, ac, fusion, compute_dtype,
  /// flops, machine).
  std::string plan_options;
  std::string run_options;

  ModuleTable modules;
  ParamTable params;
  SiteTable sites;
  PartitionRecord partition;
  Timings timings;
  Collectives collectives;
  std::map<std::string, std::int64_t> memory;       ///< bytes, by name
  std::map<std::string, double> summary;            ///< step_ms, tokens_per_s, ...
  std::map<std::string, std::string> summary_text;  ///< timings_source, check, ...
};

struct ResultsFile {
  Provenance provenance;
  std::vector<RunRecord> runs;
};

}  // namespace dmuon::results
