// Tensor-parallel runs in results files (issue 11 part 7): T, the TP columns of the params
// table and the tp_gather / tp_scatter collectives round-trip; files without them (older) read
// as T = 1; damaged TP fields are one InputError line naming the file; the run key holds T.

#include <gtest/gtest.h>
#include <hdf5.h>

#include <cmath>

#include "dmuon/base/error.hpp"
#include "dmuon/results/compare.hpp"
#include "dmuon/results/results_reader.hpp"
#include "dmuon/results/results_writer.hpp"
#include "sample_record.hpp"

namespace {

using namespace dmuon;
using namespace dmuon::results;
using fixture::TempDir;

// The sample run as R x G x T = 1 x 2 x 2: layers.0.w (4 x 8) column-parallel over T = 2
// (16 elements per rank), the norm weight and the scalar not TP-sharded. Per world rank
// w = q * 2 + t: the DP collectives, then the TP gather and scatter of layers.0.w (owner: TP
// rank 1 of DP owner 1 = world rank 3): the non-owner of each TP group sends its 16 fp32
// elements (64 bytes) in one gather and receives 64 bytes in one scatter.
ResultsFile tp_file() {
  ResultsFile f = fixture::sample_file();
  f.runs.resize(1);
  f.provenance.world_size = 4;
  RunRecord& r = f.runs[0];
  r.world_size = 4;
  r.tp = 2;
  r.params.tp_shard_dim = {0, -1, -1};
  r.params.tp_local_numel = {16, 8, 1};
  r.timings.ranks = 4;
  r.timings.seconds.clear();
  for (int i = 0; i < 24; ++i) r.timings.seconds.push_back(0.001 * (i + 1));
  r.timings.step_seconds = {0.006, 0.015, 0.024, 0.033, 0.042, 0.051, 0.060, 0.069};
  auto& c = r.collectives;
  c.kinds = {"broadcast", "reduce", "tp_gather", "tp_scatter"};
  c.ranks = 4;
  c.calls_per_step = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  c.bytes_per_rank_per_step = {0, 0, 64, 64, 64, 64, 0, 0, 64, 0, 64, 0, 64, 0, 64, 0};
  c.formula_bytes_per_rank_per_step = c.bytes_per_rank_per_step;
  c.message_bytes_per_step = {64, 64, std::nan(""), std::nan("")};
  c.group_size = {2, 2, 2, 2};
  c.in_flight_seconds = {1e-6, 1e-6, std::nan(""), std::nan("")};
  return f;
}

// Replaces attribute `name` of `obj` by a scalar int64 (delete and create, as the damage tools
// of results_damaged_test.cpp do).
void set_int_attr(const std::string& path, const char* obj, const char* name, std::int64_t v) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  EXPECT_GE(H5Adelete_by_name(file, obj, name, H5P_DEFAULT), 0);
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t a = H5Acreate_by_name(file, obj, name, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT,
                                    H5P_DEFAULT);
  ASSERT_GE(a, 0);
  EXPECT_GE(H5Awrite(a, H5T_NATIVE_INT64, &v), 0);
  H5Aclose(a);
  H5Sclose(space);
  EXPECT_GE(H5Fclose(file), 0);
}

void delete_attr(const std::string& path, const char* obj, const char* name) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  EXPECT_GE(H5Adelete_by_name(file, obj, name, H5P_DEFAULT), 0);
  H5Fclose(file);
}

void set_ints(const std::string& path, const char* dataset, const std::vector<std::int64_t>& v) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  const hid_t d = H5Dopen2(file, dataset, H5P_DEFAULT);
  ASSERT_GE(d, 0);
  H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
  H5Dclose(d);
  H5Fclose(file);
}

void expect_damaged(const std::string& path, const std::string& text) {
  try {
    (void)read_results(path);
    ADD_FAILURE() << "no error for damaged " << path;
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    EXPECT_NE(what.find(text), std::string::npos) << what;
  }
}

TEST(ResultsTp, RoundTripsTheTpFields) {
  TempDir dir("tp_round_trip");
  const auto path = dir.file("tp.h5");
  write_results(path, tp_file());
  const auto g = read_results(path);
  ASSERT_EQ(g.runs.size(), 1u);
  const auto& r = g.runs[0];
  EXPECT_EQ(r.tp, 2);
  EXPECT_EQ(r.world_size, 4);
  EXPECT_EQ(r.replicate, 1);
  EXPECT_EQ(r.params.tp_shard_dim, (std::vector<std::int64_t>{0, -1, -1}));
  EXPECT_EQ(r.params.tp_local_numel, (std::vector<std::int64_t>{16, 8, 1}));
  const auto& c = r.collectives;
  EXPECT_EQ(c.kinds, (std::vector<std::string>{"broadcast", "reduce", "tp_gather", "tp_scatter"}));
  EXPECT_EQ(c.ranks, 4);
  // tp_gather: world ranks 0 and 2 (the non-owners, TP index 0) send 64 bytes each.
  EXPECT_EQ(c.bytes_per_rank_per_step[8], 64);
  EXPECT_EQ(c.bytes_per_rank_per_step[9], 0);
  EXPECT_EQ(c.bytes_per_rank_per_step[10], 64);
  EXPECT_EQ(c.formula_bytes_per_rank_per_step[14], 64);
  EXPECT_EQ(c.group_size[3], 2);
  EXPECT_TRUE(std::isnan(c.in_flight_seconds[2]));
}

TEST(ResultsTp, OlderFilesReadAsTpOne) {
  TempDir dir("tp_older");
  const auto path = dir.file("old.h5");
  write_results(path, fixture::sample_file());  // tp 1: no TP columns
  delete_attr(path, "/runs/0", "tp");           // as written before the attribute existed
  const auto g = read_results(path);
  EXPECT_EQ(g.runs[0].tp, 1);
  EXPECT_TRUE(g.runs[0].params.tp_shard_dim.empty());
  EXPECT_TRUE(g.runs[0].params.tp_local_numel.empty());
}

TEST(ResultsTp, DamagedTpFieldsAreOneLine) {
  TempDir dir("tp_damaged");
  {
    const auto path = dir.file("tp3.h5");  // 4 ranks cannot be R x G x 3
    write_results(path, tp_file());
    set_int_attr(path, "/runs/0", "tp", 3);
    expect_damaged(path, "tp 3 is not a valid layout for world size 4");
  }
  {
    const auto path = dir.file("tp0.h5");
    write_results(path, tp_file());
    set_int_attr(path, "/runs/0", "tp", 0);
    expect_damaged(path, "tp 0 is not a valid layout");
  }
  {
    const auto path = dir.file("dim.h5");
    write_results(path, tp_file());
    set_ints(path, "/runs/0/topology/params/tp_shard_dim", {2, -1, -1});
    expect_damaged(path, "shard dimension 2 (valid: -1, 0, 1)");
  }
  {
    const auto path = dir.file("numel.h5");  // 32 / 2 = 16, not 32
    write_results(path, tp_file());
    set_ints(path, "/runs/0/topology/params/tp_local_numel", {32, 8, 1});
    expect_damaged(path, "parameter 0 holds 32 elements per rank (valid: 16");
  }
  {
    const auto path = dir.file("kinds.h5");  // TP kinds in a run that claims tp 1
    write_results(path, tp_file());
    set_int_attr(path, "/runs/0", "tp", 1);
    set_ints(path, "/runs/0/topology/params/tp_local_numel", {32, 8, 1});  // right for tp 1
    expect_damaged(path, "kind tp_gather in a run with tp 1");
  }
}

TEST(ResultsTp, RunKeyHoldsT) {
  RunRecord a = fixture::sample_run();
  RunRecord b = a;
  b.tp = 2;
  EXPECT_NE(run_key(a).find(" T=1"), std::string::npos) << run_key(a);
  EXPECT_NE(run_key(b).find(" T=2"), std::string::npos) << run_key(b);
  EXPECT_NE(run_key(a), run_key(b));
}

}  // namespace
