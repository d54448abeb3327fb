// Damaged results files: every one is an InputError (exit 2 in the apps) with one line naming
// the file — never a crash, a hang or an unbounded allocation. The corpus: structural damage
// made with the HDF5 C API (array-valued and mistyped attributes, shapes a file cannot hold,
// counts that disagree), truncations at many lengths, and byte flips over the whole file.
// Also: self-description (units, dimension labels, integer counts), schema-1 files still read,
// and an interrupted write (SIGTERM) leaves no temporary behind.

#include <gtest/gtest.h>
#include <hdf5.h>
#include <hdf5_hl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <iterator>

#include "dmuon/base/error.hpp"
#include "dmuon/results/h5.hpp"
#include "dmuon/results/results_reader.hpp"
#include "dmuon/results/results_writer.hpp"
#include "sample_record.hpp"

namespace {

using namespace dmuon;
using namespace dmuon::results;
namespace fs = std::filesystem;
using fixture::TempDir;

std::string write_sample(const TempDir& dir, const std::string& name) {
  const auto path = dir.file(name);
  write_results(path, fixture::sample_file());
  return path;
}

// Opens `path` read-write with the plain C API (the damage tools).
struct RawFile {
  hid_t id;
  explicit RawFile(const std::string& path) : id(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)) {
    EXPECT_GE(id, 0) << path;
  }
  ~RawFile() { H5Fclose(id); }
};

void replace_attr(hid_t loc, const char* obj, const char* name, hid_t type, hid_t space,
                  const void* data) {
  if (H5Aexists_by_name(loc, obj, name, H5P_DEFAULT) > 0)
    H5Adelete_by_name(loc, obj, name, H5P_DEFAULT);
  const hid_t a =
      H5Acreate_by_name(loc, obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(a, 0);
  if (data) H5Awrite(a, type, data);
  H5Aclose(a);
}

// The read must end in one InputError line naming the file (and `text` when given).
void expect_damaged(const std::string& path, const std::string& text = "") {
  try {
    (void)read_results(path);
    ADD_FAILURE() << "no error for damaged " << path;
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    if (!text.empty()) {
      EXPECT_NE(what.find(text), std::string::npos) << what;
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not an InputError: " << e.what();
  }
}

TEST(DamagedFile, ArrayValuedAttributes) {
  TempDir dir("dmg_array");
  for (const char* obj : {"/", "/runs/0", "/runs/0/partition", "/runs/0/summary"}) {
    const auto path = write_sample(dir, "a.h5");
    const char* name = std::string(obj) == "/"                   ? "num_runs"
                       : std::string(obj) == "/runs/0"           ? "world_size"
                       : std::string(obj) == "/runs/0/partition" ? "makespan"
                                                                 : "step_ms";
    {
      RawFile f(path);
      const hsize_t n = 1000;  // 1000 int64 into a scalar would overrun the reader's buffer
      std::vector<std::int64_t> v(n, 7);
      const hid_t space = H5Screate_simple(1, &n, nullptr);
      replace_attr(f.id, obj, name, H5T_NATIVE_INT64, space, v.data());
      H5Sclose(space);
    }
    expect_damaged(path, "expected a scalar attribute, found 1000 values");
  }
}

TEST(DamagedFile, MistypedAttributes) {
  TempDir dir("dmg_type");
  struct Case {
    const char* obj;
    const char* name;
    bool as_string;  // write a string where a number belongs, or a number for a string
    const char* text;
  };
  for (const auto& c : {Case{"/", "num_runs", true, "expected an integer attribute"},
                        Case{"/", "format", false, "not a dmuon results file"},
                        Case{"/runs/0", "status", false, "expected a string attribute"},
                        Case{"/runs/0/partition", "lower_bound", true, "expected a numeric"},
                        Case{"/runs/0", "world_size", true, "expected an integer attribute"}}) {
    const auto path = write_sample(dir, "t.h5");
    {
      RawFile f(path);
      const hid_t scalar = H5Screate(H5S_SCALAR);
      if (c.as_string) {
        const hid_t t = H5Tcopy(H5T_C_S1);
        H5Tset_size(t, 4);
        replace_attr(f.id, c.obj, c.name, t, scalar, "abc");
        H5Tclose(t);
      } else {
        const double x = 1.5;
        replace_attr(f.id, c.obj, c.name, H5T_NATIVE_DOUBLE, scalar, &x);
      }
      H5Sclose(scalar);
    }
    expect_damaged(path, c.text);
  }
}

TEST(DamagedFile, EmptyAttribute) {
  TempDir dir("dmg_null");
  const auto path = write_sample(dir, "n.h5");
  {
    RawFile f(path);
    const hid_t null_space = H5Screate(H5S_NULL);
    replace_attr(f.id, "/", "num_runs", H5T_NATIVE_INT64, null_space, nullptr);
    H5Sclose(null_space);
  }
  expect_damaged(path, "expected a scalar attribute, found 0 values");
}

TEST(DamagedFile, ShapesTheFileCannotHold) {
  // A dataset whose header claims 2^40 x 2 x 6 values but stores none (HDF5 allocates late):
  // reading it must not try to allocate 100 TB.
  TempDir dir("dmg_shape");
  const auto path = write_sample(dir, "s.h5");
  {
    RawFile f(path);
    H5Ldelete(f.id, "/runs/0/timings/seconds", H5P_DEFAULT);
    const hsize_t dims[3] = {hsize_t{1} << 40, 2, 3};
    const hid_t space = H5Screate_simple(3, dims, nullptr);
    const hid_t d = H5Dcreate2(f.id, "/runs/0/timings/seconds", H5T_IEEE_F64LE, space, H5P_DEFAULT,
                               H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(d, 0);
    H5Dclose(d);
    H5Sclose(space);
  }
  expect_damaged(path, "more than a");
}

TEST(DamagedFile, CountsThatDisagree) {
  TempDir dir("dmg_counts");
  {
    const auto path = write_sample(dir, "runs.h5");
    {
      RawFile f(path);
      const std::int64_t n = 1'000'000'000;
      const hid_t scalar = H5Screate(H5S_SCALAR);
      replace_attr(f.id, "/", "num_runs", H5T_NATIVE_INT64, scalar, &n);
      H5Sclose(scalar);
    }
    expect_damaged(path, "num_runs is 1000000000 but /runs holds 2 groups");
  }
  {
    const auto path = write_sample(dir, "world.h5");
    {
      RawFile f(path);
      const std::int64_t w = 0;
      const hid_t scalar = H5Screate(H5S_SCALAR);
      replace_attr(f.id, "/runs/0", "world_size", H5T_NATIVE_INT64, scalar, &w);
      H5Sclose(scalar);
    }
    expect_damaged(path, "not a valid layout");
  }
  {
    // owner_count claims more owners than the list holds.
    const auto path = write_sample(dir, "owners.h5");
    {
      RawFile f(path);
      const hid_t d = H5Dopen2(f.id, "/runs/0/boundary/sites/owner_count", H5P_DEFAULT);
      const std::int64_t bad[2] = {1'000'000, 0};
      H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, bad);
      H5Dclose(d);
    }
    expect_damaged(path, "owner counts exceed the owner list");
  }
  {
    const auto path = write_sample(dir, "noruns.h5");
    {
      RawFile f(path);
      H5Ldelete(f.id, "/runs/1", H5P_DEFAULT);
    }
    expect_damaged(path);
  }
}

TEST(DamagedFile, FifoIsRefusedWithoutBlocking) {
  TempDir dir("dmg_fifo");
  const auto path = dir.file("pipe.h5");
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  expect_damaged(path, "not a regular file");  // opening a FIFO would block forever
}

std::vector<char> bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<char>& b, std::size_t n) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(b.data(), static_cast<std::streamsize>(n));
}

TEST(DamagedFile, TruncatedAnywhere) {
  TempDir dir("dmg_trunc");
  const auto good = write_sample(dir, "good.h5");
  const auto b = bytes_of(good);
  ASSERT_GT(b.size(), 1000u);
  const auto path = dir.file("cut.h5");
  // 0 bytes, the superblock, then every 1/40 of the file.
  std::vector<std::size_t> cuts = {0, 1, 8, 48, 96};
  for (std::size_t k = 1; k < 40; ++k) cuts.push_back(b.size() * k / 40);
  cuts.push_back(b.size() - 1);
  for (std::size_t n : cuts) {
    write_bytes(path, b, n);
    SCOPED_TRACE("truncated to " + std::to_string(n) + " of " + std::to_string(b.size()));
    expect_damaged(path);
  }
}

TEST(DamagedFile, ByteFlipsNeverCrash) {
  // Flip one byte at a time at 300 offsets spread over the file: each read either succeeds (the
  // byte was in data or padding) or is an InputError naming the file; a crash or another
  // exception type fails the test.
  TempDir dir("dmg_flip");
  const auto good = write_sample(dir, "good.h5");
  const auto b = bytes_of(good);
  const auto path = dir.file("flip.h5");
  int errors = 0, reads = 0;
  for (std::size_t k = 0; k < 300; ++k) {
    auto c = b;
    const std::size_t at = (k * 7919u) % b.size();
    c[at] = static_cast<char>(c[at] ^ 0x5a);
    write_bytes(path, c, c.size());
    SCOPED_TRACE("byte " + std::to_string(at) + " flipped");
    try {
      (void)read_results(path);
      ++reads;
    } catch (const InputError& e) {
      ++errors;
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not an InputError: " << e.what();
    }
  }
  EXPECT_EQ(errors + reads, 300);
  EXPECT_GT(errors, 0);  // some flips must hit metadata
}

TEST(SelfDescription, UnitsLabelsAndIntegerCounts) {
  TempDir dir("units");
  const auto path = write_sample(dir, "u.h5");
  const auto f = h5::File::open_read(path);
  const auto run = f.open_group("runs").open_group("0");
  const auto t = run.open_group("timings");
  EXPECT_EQ(t.dataset_units("seconds"), "s");
  EXPECT_EQ(t.dataset_dim_labels("seconds"), (std::vector<std::string>{"sample", "rank", "phase"}));
  EXPECT_EQ(t.dataset_units("step_seconds"), "s");
  EXPECT_EQ(t.dataset_dim_labels("step_seconds"), (std::vector<std::string>{"sample", "rank"}));
  const auto c = run.open_group("collectives");
  EXPECT_EQ(c.dataset_units("calls_per_step"), "calls/step");
  EXPECT_EQ(c.dataset_units("bytes_per_rank_per_step"), "B/step");
  EXPECT_EQ(c.dataset_dim_labels("formula_bytes_per_rank_per_step"),
            (std::vector<std::string>{"kind", "rank"}));
  EXPECT_EQ(run.open_group("memory").dataset_units("bytes"), "B");
  EXPECT_EQ(run.open_group("boundary").open_group("sites").dataset_units("bytes"), "B");
  EXPECT_EQ(run.open_group("partition").dataset_units("numel_loads"), "elements");
  const auto s = run.open_group("summary");
  EXPECT_EQ(s.attr_kind("hook_calls_per_step"), h5::AttrKind::integer);  // a count
  EXPECT_EQ(s.attr_kind("step_ms"), h5::AttrKind::floating);
  EXPECT_EQ(s.read_attr_int("hook_calls_per_step"), 2);
}

TEST(SchemaOne, OlderFilesStillRead) {
  // A schema-1 file: no per-sample step times, no run inputs as attributes (only in `config`),
  // no hardware provenance.
  TempDir dir("schema1");
  auto sample = fixture::sample_file();
  sample.runs[0].config_text =
      "topology: moe\ncompute: none\ntokens: 8\nsteps: 4\nwarmup: 2\nseed: 9\n";
  const auto path = dir.file("old.h5");
  write_results(path, sample);
  {
    RawFile f(path);
    for (const char* a : {"device", "device_model", "cpu_features", "blas_library", "blas_core",
                          "sgemm_gflops", "sgemm_size", "scheduler_job", "transport_settings"})
      H5Adelete(f.id, a);
    for (const char* run : {"/runs/0", "/runs/1"}) {
      for (const char* a :
           {"compute", "global_samples", "steps", "warmup", "seed", "sets", "plan_options"})
        H5Adelete_by_name(f.id, run, a, H5P_DEFAULT);
      H5Ldelete(f.id, (std::string(run) + "/timings/step_seconds").c_str(), H5P_DEFAULT);
      H5Adelete_by_name(f.id, (std::string(run) + "/timings").c_str(), "repeats", H5P_DEFAULT);
    }
    const char* one = "1";
    const hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    const hid_t scalar = H5Screate(H5S_SCALAR);
    replace_attr(f.id, "/", "schema_version", t, scalar, &one);
    H5Sclose(scalar);
    H5Tclose(t);
  }
  const auto g = read_results(path);
  EXPECT_EQ(g.provenance.schema_version, "1");
  EXPECT_TRUE(g.provenance.device_model.empty());
  EXPECT_TRUE(g.provenance.transport_settings.empty());
  const auto& r = g.runs[0];
  EXPECT_EQ(r.compute, "none");
  EXPECT_EQ(r.global_samples, 16);  // tokens 8 per rank x 2 ranks
  EXPECT_EQ(r.steps, 4);
  EXPECT_EQ(r.warmup, 2);
  EXPECT_EQ(r.seed, 9);
  EXPECT_TRUE(r.timings.step_seconds.empty());
  EXPECT_EQ(r.timings.repeats, 1);
}

TEST(InterruptedWrite, SigtermRemovesTheTemporary) {
  TempDir dir("sigterm");
  const auto path = dir.file("r.h5");
  const std::string temp = path + ".tmp.";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto f = h5::File::create(path);
    f.write_attr("format", "dmuon-results");
    H5Fflush(f.id(), H5F_SCOPE_GLOBAL);
    ::raise(SIGTERM);  // mid-write
    ::_exit(0);        // not reached
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGTERM);  // died of the signal, as the parent must see
  EXPECT_TRUE(fs::is_empty(dir.path)) << "a temporary was left behind";
  // SIGINT as well, and a write that completes leaves the handlers as they were.
  const pid_t child2 = ::fork();
  ASSERT_GE(child2, 0);
  if (child2 == 0) {
    write_results(path, fixture::sample_file());
    auto f = h5::File::create(path + "2");
    ::raise(SIGINT);
    ::_exit(0);
  }
  ASSERT_EQ(::waitpid(child2, &status, 0), child2);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator{}), 1);
  EXPECT_TRUE(fs::exists(path));
  (void)temp;
}

}  // namespace

namespace {

TEST(FailedWrite, NamesTheCauseAndLeavesNothing) {
  // A file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored) makes the write fail with EFBIG, as a
  // full disk fails with ENOSPC: the error names the cause, no temporary stays behind, and the
  // process still ends cleanly (HDF5's exit-time cleanup with a failed file must not crash).
  TempDir dir("efbig");
  const auto path = dir.file("r.h5");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim {
      4096, 4096
    };
    ::setrlimit(RLIMIT_FSIZE, &lim);
    int code = 10;
    try {
      write_results(path, fixture::sample_file());
    } catch (const RuntimeFailure& e) {
      code = std::string(e.what()).find("File too large") != std::string::npos ? 0 : 11;
      if (code) std::fprintf(stderr, "message: %s\n", e.what());
    }
    std::exit(code);  // a normal exit, with atexit handlers (HDF5's included)
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(fs::is_empty(dir.path)) << "a temporary was left behind";
}

}  // namespace
