#pragma once
// A results file with every field set to a distinctive value, for round-trip tests.

#include <unistd.h>

#include <filesystem>
#include <string>

#include "dmuon/results/run_record.hpp"

namespace dmuon::results::fixture {

inline RunRecord sample_run() {
  RunRecord r;
  r.config_text = "topology: moe\nboundary: recommended\n";
  r.topology = "moe";
  r.preset = "tiny";
  r.dedicate_rule = "ndim=2&excludes:router";
  r.boundary_spec = "types:Expert,MoELayer";
  r.boundary_label = "recommended (strict)";
  r.strict = true;
  r.boundary_warnings = {"WARNING [swallowed_repeats] site layers.0 holds 8 experts", "note x"};
  r.suggested_boundary = "types:Expert";
  r.method = "dmuon";
  r.reshard = "z2";
  r.grad_reduce = "packed";
  r.prefetch = 2;
  r.clip_norm = "0.5:inf";
  r.accum = 3;
  r.world_size = 2;
  r.replicate = 1;
  r.compute = "gemm";
  r.global_samples = 32;
  r.steps = 2;
  r.warmup = 1;
  r.seed = 7;
  r.sets = "";
  r.plan_options = "pack=<5000000 max_owners_per_group=0 column_balance=on";
  r.modules.path = {"", "layers", "layers.0"};
  r.modules.type = {"Root", "ModuleList", "Layer"};
  r.modules.parent = {-1, 0, 1};
  r.params.name = {"layers.0.w", "layers.0.norm.weight", "layers.0.s"};
  r.params.shape = {{4, 8}, {8}, {}};
  r.params.dtype = {"float32", "bfloat16", "float32"};
  r.params.dedicated = {1, 0, 0};
  r.params.owner_rank = {1, -1, -1};
  r.params.site = {0, -1, -1};
  r.params.cost = {3, 0, 0};
  r.sites.path = {"layers.0", ""};
  r.sites.type = {"Layer", "Root"};
  r.sites.param_count = {1, 0};
  r.sites.numel = {32, 0};
  r.sites.bytes = {128, 0};
  r.sites.owners = {{0, 1}, {}};
  auto& q = r.partition;
  q.strategy = "lpt";
  q.cost_model = "optimizer";
  q.shard = 2;
  q.replicate = 1;
  q.slot_rank = {0, 1};
  q.numel_loads = {0, 32};
  q.cost_loads = {0, 3};
  q.num_units = 1;
  q.packed_units = 0;
  q.total_cost = 3;
  q.makespan = 3;
  q.lower_bound = 3.0;
  q.ratio = 1.0;
  q.imbalance_all = 1.0;
  q.imbalance_nonempty = 0.0;
  q.empty_slots = 1;
  q.key_collisions = 0;
  r.timings.phases = {"forward", "backward", "optimizer"};
  r.timings.steps = 2;
  r.timings.ranks = 2;
  for (int i = 0; i < 12; ++i) r.timings.seconds.push_back(0.001 * (i + 1));
  r.timings.step_seconds = {0.007, 0.0155, 0.025, 0.0335};
  r.collectives.kinds = {"broadcast", "reduce"};
  r.collectives.ranks = 2;
  r.collectives.calls_per_step = {2, 2, 1, 1};
  r.collectives.bytes_per_rank_per_step = {128, 0, 128, 0};
  r.collectives.formula_bytes_per_rank_per_step = {128, 0, 128, 0};
  r.memory = {{"master_bytes_max", 128}, {"momentum_bytes_max", 128}};
  r.summary = {{"step_ms", 12.5}, {"tokens_per_s", 1.25e6}, {"hook_calls_per_step", 2}};
  r.summary_text = {{"timings_source", "synthetic-example"}, {"check", "passed"}};
  return r;
}

inline ResultsFile sample_file() {
  ResultsFile f;
  auto& p = f.provenance;
  p.suite_version = "0.1.0";
  p.git_commit = "abc123";
  p.build_type = "Release";
  p.compiler = "GNU 12.2.0";
  p.mpi_version = "Open MPI v4.1.4";
  p.kokkos_version = "4.0.0";
  p.hdf5_version = "1.10.8";
  p.cuda_version = "n/a";
  p.nccl_version = "n/a";
  p.hostnames = {"node1", "node2"};
  p.date_utc = "2026-11-29T09:07:22Z";
  p.command_line = "dmuon_bench --topology moe 'a b'";
  p.scheduler_job = "slurm 4242 nodes gpu[01-16]";
  p.transport_settings = "NCCL_IB_HCA=mlx5 OMPI_MCA_btl=self,vader";
  p.world_size = 2;
  p.replicate = 1;
  p.device = "host";
  p.device_model = "Example CPU";
  p.cpu_features = "avx2";
  p.blas_library = "OpenBLAS 0.3.21";
  p.blas_core = "Haswell";
  p.sgemm_gflops = 95.5;
  p.sgemm_size = 512;
  f.runs.push_back(sample_run());
  RunRecord rejected;
  rejected.status = "rejected";
  rejected.error = "parameter layers.0.w (4x8, parent layers.0): no ancestor matched";
  rejected.topology = "moe";
  rejected.boundary_spec = "types:Expert";
  rejected.strict = true;
  rejected.world_size = 2;
  f.runs.push_back(rejected);
  return f;
}

/// A fresh empty directory under the system temp directory, removed on destruction.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& tag) {
    path = std::filesystem::temp_directory_path() /
           ("dmuon_" + tag + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

}  // namespace dmuon::results::fixture
