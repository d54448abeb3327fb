// Results files: write -> read round trip of every field, atomic replacement, bad files,
// output-path checks, provenance, and the plan -> record helper on a real plan.

#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "dmuon/base/error.hpp"
#include "dmuon/engine/step/step_volume.hpp"
#include "dmuon/model/topology.hpp"
#include "dmuon/plan/comm_volume.hpp"
#include "dmuon/plan/plan.hpp"
#include "dmuon/results/h5.hpp"
#include "dmuon/results/plan_record.hpp"
#include "dmuon/results/provenance.hpp"
#include "dmuon/results/results_reader.hpp"
#include "dmuon/results/results_writer.hpp"
#include "dmuon/results/summary.hpp"
#include "sample_record.hpp"

namespace {

using namespace dmuon;
using namespace dmuon::results;
namespace fs = std::filesystem;
using fixture::TempDir;

void expect_same(const RunRecord& a, const RunRecord& b) {
  EXPECT_EQ(a.status, b.status);
  EXPECT_EQ(a.error, b.error);
  EXPECT_EQ(a.config_text, b.config_text);
  EXPECT_EQ(a.topology, b.topology);
  EXPECT_EQ(a.preset, b.preset);
  EXPECT_EQ(a.dedicate_rule, b.dedicate_rule);
  EXPECT_EQ(a.boundary_spec, b.boundary_spec);
  EXPECT_EQ(a.boundary_label, b.boundary_label);
  EXPECT_EQ(a.strict, b.strict);
  EXPECT_EQ(a.boundary_warnings, b.boundary_warnings);
  EXPECT_EQ(a.suggested_boundary, b.suggested_boundary);
  EXPECT_EQ(a.method, b.method);
  EXPECT_EQ(a.reshard, b.reshard);
  EXPECT_EQ(a.grad_reduce, b.grad_reduce);
  EXPECT_EQ(a.prefetch, b.prefetch);
  EXPECT_EQ(a.clip_norm, b.clip_norm);
  EXPECT_EQ(a.accum, b.accum);
  EXPECT_EQ(a.world_size, b.world_size);
  EXPECT_EQ(a.replicate, b.replicate);
  EXPECT_EQ(a.compute, b.compute);
  EXPECT_EQ(a.global_samples, b.global_samples);
  EXPECT_EQ(a.steps, b.steps);
  EXPECT_EQ(a.warmup, b.warmup);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.sets, b.sets);
  EXPECT_EQ(a.plan_options, b.plan_options);
  EXPECT_EQ(a.timings.step_seconds, b.timings.step_seconds);
  EXPECT_EQ(a.timings.repeats, b.timings.repeats);
  EXPECT_EQ(a.modules.path, b.modules.path);
  EXPECT_EQ(a.modules.type, b.modules.type);
  EXPECT_EQ(a.modules.parent, b.modules.parent);
  EXPECT_EQ(a.params.name, b.params.name);
  EXPECT_EQ(a.params.shape, b.params.shape);
  EXPECT_EQ(a.params.dtype, b.params.dtype);
  EXPECT_EQ(a.params.dedicated, b.params.dedicated);
  EXPECT_EQ(a.params.owner_rank, b.params.owner_rank);
  EXPECT_EQ(a.params.site, b.params.site);
  EXPECT_EQ(a.params.cost, b.params.cost);
  EXPECT_EQ(a.sites.path, b.sites.path);
  EXPECT_EQ(a.sites.type, b.sites.type);
  EXPECT_EQ(a.sites.param_count, b.sites.param_count);
  EXPECT_EQ(a.sites.numel, b.sites.numel);
  EXPECT_EQ(a.sites.bytes, b.sites.bytes);
  EXPECT_EQ(a.sites.owners, b.sites.owners);
  const auto &p = a.partition, &q = b.partition;
  EXPECT_EQ(p.strategy, q.strategy);
  EXPECT_EQ(p.cost_model, q.cost_model);
  EXPECT_EQ(p.shard, q.shard);
  EXPECT_EQ(p.replicate, q.replicate);
  EXPECT_EQ(p.slot_rank, q.slot_rank);
  EXPECT_EQ(p.numel_loads, q.numel_loads);
  EXPECT_EQ(p.cost_loads, q.cost_loads);
  EXPECT_EQ(p.num_units, q.num_units);
  EXPECT_EQ(p.packed_units, q.packed_units);
  EXPECT_EQ(p.total_cost, q.total_cost);
  EXPECT_EQ(p.makespan, q.makespan);
  EXPECT_EQ(p.lower_bound, q.lower_bound);
  EXPECT_EQ(p.ratio, q.ratio);
  EXPECT_EQ(p.imbalance_all, q.imbalance_all);
  EXPECT_EQ(p.imbalance_nonempty, q.imbalance_nonempty);
  EXPECT_EQ(p.empty_slots, q.empty_slots);
  EXPECT_EQ(p.key_collisions, q.key_collisions);
  EXPECT_EQ(a.timings.phases, b.timings.phases);
  EXPECT_EQ(a.timings.steps, b.timings.steps);
  EXPECT_EQ(a.timings.ranks, b.timings.ranks);
  EXPECT_EQ(a.timings.seconds, b.timings.seconds);
  EXPECT_EQ(a.collectives.kinds, b.collectives.kinds);
  EXPECT_EQ(a.collectives.ranks, b.collectives.ranks);
  EXPECT_EQ(a.collectives.calls_per_step, b.collectives.calls_per_step);
  EXPECT_EQ(a.collectives.bytes_per_rank_per_step, b.collectives.bytes_per_rank_per_step);
  EXPECT_EQ(a.collectives.formula_bytes_per_rank_per_step,
            b.collectives.formula_bytes_per_rank_per_step);
  EXPECT_EQ(a.memory, b.memory);
  EXPECT_EQ(a.summary, b.summary);
  EXPECT_EQ(a.summary_text, b.summary_text);
}

TEST(ResultsFile, RoundTripsEveryField) {
  TempDir dir("rt");
  const auto path = dir.file("r.h5");
  const auto f = fixture::sample_file();
  write_results(path, f);
  const auto g = read_results(path);
  const auto &p = f.provenance, &q = g.provenance;
  EXPECT_EQ(q.schema_version, "2");
  EXPECT_EQ(p.device, q.device);
  EXPECT_EQ(p.device_model, q.device_model);
  EXPECT_EQ(p.cpu_features, q.cpu_features);
  EXPECT_EQ(p.blas_library, q.blas_library);
  EXPECT_EQ(p.blas_core, q.blas_core);
  EXPECT_EQ(p.sgemm_gflops, q.sgemm_gflops);
  EXPECT_EQ(p.sgemm_size, q.sgemm_size);
  EXPECT_EQ(p.suite_version, q.suite_version);
  EXPECT_EQ(p.git_commit, q.git_commit);
  EXPECT_EQ(p.build_type, q.build_type);
  EXPECT_EQ(p.compiler, q.compiler);
  EXPECT_EQ(p.mpi_version, q.mpi_version);
  EXPECT_EQ(p.kokkos_version, q.kokkos_version);
  EXPECT_EQ(p.hdf5_version, q.hdf5_version);
  EXPECT_EQ(p.cuda_version, q.cuda_version);
  EXPECT_EQ(p.nccl_version, q.nccl_version);
  EXPECT_EQ(p.hostnames, q.hostnames);
  EXPECT_EQ(p.date_utc, q.date_utc);
  EXPECT_EQ(p.command_line, q.command_line);
  EXPECT_EQ(p.scheduler_job, q.scheduler_job);
  EXPECT_EQ(p.transport_settings, q.transport_settings);
  EXPECT_EQ(p.world_size, q.world_size);
  EXPECT_EQ(p.replicate, q.replicate);
  ASSERT_EQ(g.runs.size(), 2u);
  expect_same(f.runs[0], g.runs[0]);
  expect_same(f.runs[1], g.runs[1]);
  EXPECT_EQ(g.runs[1].timings.steps, 0);
}

// reduce_dtype is stored only where it differs from comm_dtype, so a run with one wire type
// writes the file it wrote before the field existed, and every file reads it back.
TEST(ResultsFile, ReduceDtypeStoredOnlyWhereItDiffers) {
  TempDir dir("reduce");
  const auto path = dir.file("r.h5");
  auto f = fixture::sample_file();
  f.runs[0].comm_dtype = "bf16";
  f.runs[0].reduce_dtype = "fp32";
  f.runs[1].comm_dtype = "bf16";
  f.runs[1].reduce_dtype = "bf16";
  write_results(path, f);
  const hid_t h = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(h, 0);
  EXPECT_GT(H5Aexists_by_name(h, "/runs/0", "reduce_dtype", H5P_DEFAULT), 0);
  EXPECT_EQ(H5Aexists_by_name(h, "/runs/1", "reduce_dtype", H5P_DEFAULT), 0);
  H5Fclose(h);
  const auto g = read_results(path);
  EXPECT_EQ(g.runs[0].reduce_dtype, "fp32");
  EXPECT_EQ(g.runs[1].reduce_dtype, "bf16");  // absent: its comm_dtype
  EXPECT_EQ(g.runs[1].comm_dtype, "bf16");
}

TEST(ResultsFile, WriterWithoutCommitLeavesNothing) {
  TempDir dir("nocommit");
  const auto path = dir.file("r.h5");
  std::string temp;
  {
    auto f = h5::File::create(path);
    temp = f.temp_path();
    f.write_attr("format", "dmuon-results");
    EXPECT_TRUE(fs::exists(temp));
    EXPECT_FALSE(fs::exists(path));
  }  // destroyed without commit (an interrupted run)
  EXPECT_FALSE(fs::exists(temp));
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(fs::is_empty(dir.path));
}

TEST(ResultsFile, ExistingFileReplacedOnlyOnCommit) {
  TempDir dir("replace");
  const auto path = dir.file("r.h5");
  auto f1 = fixture::sample_file();
  write_results(path, f1);
  {
    auto f = h5::File::create(path);
    f.write_attr("format", "half-written");
    // The old file is still intact and readable while the new one is being written.
    EXPECT_EQ(read_results(path).runs.size(), 2u);
  }
  EXPECT_EQ(read_results(path).runs.size(), 2u);
  auto f2 = fixture::sample_file();
  f2.runs.pop_back();
  write_results(path, f2);
  EXPECT_EQ(read_results(path).runs.size(), 1u);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator{}), 1);
}

TEST(ResultsFile, InconsistentTimingsThrowAndLeaveNoFile) {
  TempDir dir("bad");
  const auto path = dir.file("r.h5");
  auto f = fixture::sample_file();
  f.runs[0].timings.seconds.pop_back();
  EXPECT_THROW(write_results(path, f), RuntimeFailure);
  EXPECT_TRUE(fs::is_empty(dir.path));
}

void expect_input_error_naming(const std::string& path, const std::string& text) {
  try {
    read_results(path);
    FAIL() << "no error for " << path;
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find(text), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

TEST(ResultsFile, BadFilesAreInputErrorsNamingTheFile) {
  TempDir dir("badin");
  expect_input_error_naming(dir.file("missing.h5"), "No such file");
  expect_input_error_naming(dir.path.string(), "it is a directory");
  const auto garbage = dir.file("garbage.h5");
  std::ofstream(garbage) << "this is not HDF5\n";
  expect_input_error_naming(garbage, "not an HDF5 file");
  const auto other = dir.file("other.h5");
  {
    auto f = h5::File::create(other);
    f.write_attr("title", "somebody else's file");
    f.commit();
  }
  expect_input_error_naming(other, "not a dmuon results file");
  const auto future = dir.file("future.h5");
  {
    auto f = h5::File::create(future);
    f.write_attr("format", "dmuon-results");
    f.write_attr("schema_version", "99");
    f.commit();
  }
  expect_input_error_naming(future, "schema version");
  const auto truncated = dir.file("truncated.h5");
  {
    auto f = h5::File::create(truncated);
    f.write_attr("format", "dmuon-results");
    f.write_attr("schema_version", "1");
    f.commit();
  }
  expect_input_error_naming(truncated, "missing");
}

TEST(ResultsFile, CheckOutputWritable) {
  TempDir dir("writable");
  EXPECT_NO_THROW(check_output_writable(dir.file("ok.h5")));
  EXPECT_TRUE(fs::is_empty(dir.path));  // the probe is removed
  try {
    check_output_writable(dir.file("no/such/dir/r.h5"));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(
        std::string(e.what()).find("cannot write results to '" + dir.file("no/such/dir/r.h5")),
        std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
  try {
    check_output_writable(dir.path.string());
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }
  EXPECT_THROW(check_output_writable(""), InputError);
}

TEST(Provenance, FilledWithoutMpi) {
  char a0[] = "dmuon_bench", a1[] = "--boundary", a2[] = "types:A B", a3[] = "it's";
  char* argv[] = {a0, a1, a2, a3, nullptr};
  const auto p = collect_provenance(4, argv, 8, 2);
  EXPECT_EQ(p.schema_version, "2");
  EXPECT_FALSE(p.suite_version.empty());
  EXPECT_FALSE(p.git_commit.empty());
  EXPECT_FALSE(p.compiler.empty());
  // MPI_Get_library_version works before MPI_Init (MPI-3), so serial tools report it too.
  EXPECT_FALSE(p.mpi_version.empty());
  EXPECT_EQ(p.device, "host");
  EXPECT_FALSE(p.device_model.empty());
  EXPECT_FALSE(p.blas_library.empty());
  EXPECT_NE(p.hdf5_version.find('.'), std::string::npos);
  ASSERT_EQ(p.hostnames.size(), 1u);
  EXPECT_FALSE(p.hostnames[0].empty());
  EXPECT_EQ(p.date_utc.size(), 20u);
  EXPECT_EQ(p.date_utc.back(), 'Z');
  EXPECT_EQ(p.command_line, "dmuon_bench --boundary 'types:A B' 'it'\\''s'");
  EXPECT_EQ(p.world_size, 8);
  EXPECT_EQ(p.replicate, 2);
}

TEST(Provenance, TransportSettingsAreTheTransportEnvironmentSorted) {
  // Only the transport prefixes count, sorted by the whole "K=V" text; a variable that merely
  // contains a prefix (MY_NCCL_X), a launcher variable (OMPI_MCA_orte_*) or another knob does not.
  const char* const vars[] = {"OMPI_MCA_btl",
                              "NCCL_ALGO",
                              "UCX_TLS",
                              "FI_PROVIDER",
                              "MY_NCCL_X",
                              "OMPI_ALLOW_RUN_AS_ROOT",
                              "OMPI_MCA_orte_app_num",
                              "OMPI_MCA_coll_libnbc_ibcast_algorithm"};
  std::vector<std::pair<std::string, std::string>> saved;
  for (const char* k : vars)
    if (const char* v = std::getenv(k)) saved.emplace_back(k, v);
  // The test environment sets other OMPI_MCA_* and NCCL_* variables: clear every transport one.
  std::vector<std::string> cleared;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv(*e);
    for (const char* prefix : {"OMPI_MCA_", "UCX_", "NCCL_", "FI_"})  // a superset
      if (kv.rfind(prefix, 0) == 0) cleared.push_back(kv);
  }
  for (const auto& kv : cleared) unsetenv(kv.substr(0, kv.find('=')).c_str());
  EXPECT_EQ(transport_settings(), "");
  setenv("OMPI_MCA_btl", "self,vader", 1);
  setenv("NCCL_ALGO", "Ring", 1);
  setenv("UCX_TLS", "rc", 1);
  setenv("FI_PROVIDER", "efa", 1);
  setenv("MY_NCCL_X", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_MCA_orte_app_num", "0", 1);
  setenv("OMPI_MCA_coll_libnbc_ibcast_algorithm", "2", 1);
  EXPECT_EQ(transport_settings(),
            "FI_PROVIDER=efa NCCL_ALGO=Ring OMPI_MCA_btl=self,vader "
            "OMPI_MCA_coll_libnbc_ibcast_algorithm=2 UCX_TLS=rc");
  for (const char* k : vars) unsetenv(k);
  for (const auto& kv : cleared) {
    const auto eq = kv.find('=');
    setenv(kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str(), 1);
  }
  for (const auto& [k, v] : saved) setenv(k.c_str(), v.c_str(), 1);
}

TEST(Summary, MediansOfSlowestRank) {
  Timings t;
  t.phases = {"forward", "optimizer"};
  t.steps = 3;
  t.ranks = 2;
  // step 0: rank sums 3, 5 ms; step 1: 4, 2; step 2: 10, 1  -> step max 5, 4, 10 -> median 5.
  t.seconds = {0.001, 0.002, 0.004, 0.001, 0.003, 0.001, 0.001, 0.001, 0.009, 0.001, 0.0, 0.001};
  const auto m = timing_medians(t);
  EXPECT_NEAR(m.at("step_ms"), 5.0, 1e-12);
  EXPECT_NEAR(m.at("forward_ms"), 4.0, 1e-12);    // max per step: 4, 3, 9
  EXPECT_NEAR(m.at("optimizer_ms"), 1.0, 1e-12);  // max per step: 2, 1, 1
  EXPECT_TRUE(timing_medians(Timings{}).empty());
  EXPECT_DOUBLE_EQ(median({3, 1, 2, 10}), 2.5);
}

plan::Plan moe_plan(const model::Topology& t, const std::string& boundary, bool strict) {
  plan::PlanConfig c;
  c.dedicate_rule = t.dedicate_rule;
  c.boundary = boundary;
  c.strict = strict;
  c.partition.shard = 8;
  return plan::make_plan(t.tree, c);
}

TEST(PlanRecord, MoeTinyRecommendedRoundTrips) {
  const auto topo = model::build_topology("moe", "tiny");
  const auto p = moe_plan(topo, topo.recommended_boundary, true);
  const auto v = engine::predict_step_volume(topo.tree, p, {}).owners;
  const auto r = make_plan_record(topo, p, v, "dmuon");
  EXPECT_EQ(r.topology, "moe");
  EXPECT_EQ(r.preset, "tiny");
  EXPECT_EQ(r.world_size, 8);
  EXPECT_EQ(r.boundary_spec, topo.recommended_boundary);
  EXPECT_EQ(r.sites.path.size(), p.hooks.sites.size());
  EXPECT_EQ(r.params.name.size(), topo.tree.num_parameters());
  std::int64_t dedicated = 0;
  for (std::size_t i = 0; i < r.params.name.size(); ++i) {
    if (!r.params.dedicated[i]) continue;
    ++dedicated;
    EXPECT_EQ(r.params.owner_rank[i], p.partition.owner_rank(static_cast<int>(i)));
    EXPECT_GE(r.params.site[i], 0);
  }
  EXPECT_EQ(dedicated, static_cast<std::int64_t>(p.hooks.dedicated.size()));
  EXPECT_EQ(r.collectives.kinds, (std::vector<std::string>{"broadcast", "reduce"}));
  EXPECT_EQ(r.collectives.calls_per_step.size(), 16u);
  EXPECT_EQ(r.summary.at("hook_calls_per_step"), static_cast<double>(v.hooks_fired));
  EXPECT_EQ(r.partition.cost_loads, p.partition.cost_loads);

  TempDir dir("plan");
  ResultsFile f;
  f.runs.push_back(r);
  const auto t = topo;
  plan::PlanConfig c;
  c.boundary = topo.incomplete_boundary;
  c.partition.shard = 8;
  f.runs.push_back(make_rejected_record(t, c, "no ancestor matched", "dmuon", plan::Reshard::z3));
  write_results(dir.file("p.h5"), f);
  const auto g = read_results(dir.file("p.h5"));
  expect_same(f.runs[0], g.runs[0]);
  expect_same(f.runs[1], g.runs[1]);
  EXPECT_EQ(g.runs[1].status, "rejected");
}

}  // namespace

namespace {

// Bandwidth per kind: the raw figures round-trip, and the derived nccl-tests columns follow
// from them with the kind's bus factor, group prefixes included (hand-computed: broadcast over
// 2 ranks moves 2e9 B in 2 s -> algbw 1 GB/s, factor 1; the world all-reduce over 4 ranks moves
// 1e9 B in 0.5 s -> algbw 2 GB/s, factor 2·3/4 -> busbw 3 GB/s).
TEST(ResultsFile, BandwidthFiguresRoundTripWithDerivedBusbw) {
  TempDir dir("bw");
  const auto path = dir.file("bw.h5");
  auto f = fixture::sample_file();
  auto& c = f.runs[0].collectives;
  c.kinds = {"broadcast", "world_all_reduce"};
  c.message_bytes_per_step = {2e9, 1e9};
  c.group_size = {2, 4};
  c.in_flight_seconds = {2.0, 0.5};
  write_results(path, f);
  const auto g = read_results(path);
  const auto& d = g.runs[0].collectives;
  EXPECT_EQ(d.message_bytes_per_step, c.message_bytes_per_step);
  EXPECT_EQ(d.group_size, c.group_size);
  EXPECT_EQ(d.in_flight_seconds, c.in_flight_seconds);
  const auto file = h5::File::open_read(path);
  const auto cg = file.open_group("runs").open_group("0").open_group("collectives");
  EXPECT_EQ(cg.read_doubles("algbw"), (std::vector<double>{1.0, 2.0}));
  EXPECT_EQ(cg.read_doubles("busbw"), (std::vector<double>{1.0, 3.0}));
  EXPECT_EQ(cg.dataset_units("busbw"), "GB/s");
  // The second run kept no bandwidth figures: the reader leaves them empty.
  EXPECT_TRUE(g.runs[1].collectives.in_flight_seconds.empty());
}

}  // namespace
