// File-format compatibility: results files written by an earlier build (tests/results_apps/data,
// made by dmuon_bench of main before the field-table schema) read field for field as that
// build's reader read them (the .dump.txt beside each file, made by that reader), and writing
// what was read back out gives the same datasets and attributes (names, types, shapes, units).
// Regenerate the dumps only with a reader known to be right: DMUON_WRITE_GOLDEN=1.

#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "dmuon/results/results_reader.hpp"
#include "dmuon/results/results_writer.hpp"
#include "record_dump.hpp"
#include "sample_record.hpp"

namespace {

using namespace dmuon::results;
using fixture::dump_results;

const std::string kDataDir = std::string(DMUON_SOURCE_DIR) + "/tests/results_apps/data/";

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Every object of a file with its attributes: "path kind [shape] type" and "path@attr type".
struct Visit {
  std::set<std::string> lines;
};

std::string type_class(hid_t type) {
  switch (H5Tget_class(type)) {
    case H5T_INTEGER: return "int" + std::to_string(8 * H5Tget_size(type));
    case H5T_FLOAT: return "float" + std::to_string(8 * H5Tget_size(type));
    case H5T_STRING: return H5Tis_variable_str(type) > 0 ? "vlen-str" : "str";
    default: return "other";
  }
}

herr_t visit_attr(hid_t obj, const char* name, const H5A_info_t*, void* data) {
  auto* v = static_cast<std::pair<Visit*, std::string>*>(data);
  const hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
  const hid_t t = H5Aget_type(a);
  v->first->lines.insert(v->second + "@" + name + " " + type_class(t));
  H5Tclose(t);
  H5Aclose(a);
  return 0;
}

herr_t visit_object(hid_t root, const char* name, const H5O_info_t* info, void* data) {
  auto* visit = static_cast<Visit*>(data);
  const std::string path = std::string("/") + (std::string(name) == "." ? "" : name);
  const hid_t obj = H5Oopen(root, name, H5P_DEFAULT);
  std::string line = path;
  if (info->type == H5O_TYPE_DATASET) {
    const hid_t space = H5Dget_space(obj);
    const hid_t type = H5Dget_type(obj);
    const int rank = H5Sget_simple_extent_ndims(space);
    line += " dataset rank " + std::to_string(rank) + " " + type_class(type);
    H5Tclose(type);
    H5Sclose(space);
  }
  visit->lines.insert(line);
  std::pair<Visit*, std::string> ctx{visit, path};
  hsize_t idx = 0;
  H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, &idx, visit_attr, &ctx);
  H5Oclose(obj);
  return 0;
}

std::set<std::string> structure(const std::string& path) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  EXPECT_GE(f, 0) << path;
  Visit v;
  H5Ovisit(f, H5_INDEX_NAME, H5_ITER_INC, visit_object, &v);
  H5Fclose(f);
  return v.lines;
}

class CompatTest : public ::testing::TestWithParam<const char*> {};

TEST_P(CompatTest, ReadsEveryFieldAsTheEarlierReaderDid) {
  const std::string h5 = kDataDir + GetParam() + ".h5";
  const std::string golden = kDataDir + GetParam() + ".dump.txt";
  const std::string got = dump_results(read_results(h5));
  if (std::getenv("DMUON_WRITE_GOLDEN")) {
    std::ofstream(golden) << got;
    GTEST_SKIP() << "wrote " << golden;
  }
  const std::string want = read_text(golden);
  ASSERT_FALSE(want.empty()) << golden;
  EXPECT_EQ(got, want);
}

TEST_P(CompatTest, RewritingGivesTheSameDatasetsAndAttributes) {
  const std::string h5 = kDataDir + GetParam() + ".h5";
  const auto file = read_results(h5);
  fixture::TempDir dir("compat");
  const std::string copy = dir.file("copy.h5");
  write_results(copy, file);
  EXPECT_EQ(structure(copy), structure(h5));
  EXPECT_EQ(dump_results(read_results(copy)), dump_results(file));
}

// Files from before --reduce-dtype had one wire type for both directions: their gradients'
// type reads as their comm_dtype.
TEST_P(CompatTest, ReduceDtypeReadsAsTheCommDtype) {
  const auto file = read_results(kDataDir + GetParam() + ".h5");
  ASSERT_FALSE(file.runs.empty());
  for (const auto& r : file.runs) EXPECT_EQ(r.reduce_dtype, r.comm_dtype) << r.method;
}

// A 2-rank moe sweep with a rejected strict boundary; HSDP with packed reduces, --accum and a
// baseline; TP 2 with --clip-norm and --check (the TP columns and channels).
INSTANTIATE_TEST_SUITE_P(MainFiles, CompatTest,
                         ::testing::Values("main_moe_rejected", "main_moe_hsdp", "main_llm_tp"));

}  // namespace
