#include "dmuon/results/results_reader.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>

#include "dmuon/base/error.hpp"
#include "dmuon/results/h5.hpp"

namespace dmuon::results {
namespace {

std::vector<std::string> split_hosts(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size() && !s.empty()) {
    const auto comma = s.find(',', start);
    out.push_back(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
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

void require_size(const h5::Group& g, const std::string& name, std::size_t got,
                  std::size_t expect) {
  if (got != expect)
    throw InputError(fmt::format("'{}': {} entries, expected {}", g.where(name), got, expect));
}

// The TP columns of the params table (written with tp > 1; absent in older files): every
// parameter's shard dimension is -1, 0 or 1, and its local numel is numel / T when sharded
// (numel otherwise).
void read_tp_columns(const h5::Group& p, std::int64_t tp, ParamTable& t) {
  if (!p.has("tp_shard_dim") && !p.has("tp_local_numel")) return;
  t.tp_shard_dim = p.read_ints("tp_shard_dim");
  t.tp_local_numel = p.read_ints("tp_local_numel");
  const std::size_t n = t.name.size();
  require_size(p, "tp_shard_dim", t.tp_shard_dim.size(), n);
  require_size(p, "tp_local_numel", t.tp_local_numel.size(), n);
  for (std::size_t i = 0; i < n; ++i) {
    std::int64_t numel = 1;
    for (auto d : t.shape[i]) numel *= d;
    const auto dim = t.tp_shard_dim[i];
    if (dim < -1 || dim > 1)
      throw InputError(fmt::format("'{}': parameter {} has shard dimension {} (valid: -1, 0, 1)",
                                   p.where("tp_shard_dim"), i, dim));
    const std::int64_t want = dim < 0 ? numel : numel / tp;
    if (t.tp_local_numel[i] != want || (dim >= 0 && numel % tp != 0))
      throw InputError(
          fmt::format("'{}': parameter {} holds {} elements per rank (valid: {} = numel {}{})",
                      p.where("tp_local_numel"), i, t.tp_local_numel[i], want, numel,
                      dim < 0 ? "" : fmt::format(" / tp {}", tp)));
  }
}

RunRecord read_run(const h5::Group& g) {
  RunRecord r;
  r.status = g.read_attr_string("status");
  r.error = g.read_attr_string("error");
  r.config_text = g.read_attr_string("config");
  r.topology = g.read_attr_string("topology");
  r.preset = g.read_attr_string("preset");
  r.dedicate_rule = g.read_attr_string("dedicate_rule");
  r.method = g.read_attr_string("method");
  r.reshard = g.read_attr_string("reshard");
  // Added after the first files were written; absent means the only behaviour then existed.
  r.grad_reduce = g.has_attr("grad_reduce") ? g.read_attr_string("grad_reduce") : "per-param";
  r.prefetch = g.has_attr("prefetch") ? g.read_attr_int("prefetch") : 0;
  const auto text = [&g](const char* name, const char* older) {
    return g.has_attr(name) ? g.read_attr_string(name) : std::string(older);
  };
  r.device = text("device", "host");
  r.comm_dtype = text("comm_dtype", "fp32");
  r.ns = text("ns", "direct");
  r.ns_dtype = text("ns_dtype", "fp32");
  r.optimizer_pipeline = text("optimizer_pipeline", "all-then-publish");
  r.clip_norm = text("clip_norm", "none");
  r.accum = g.has_attr("accum") ? g.read_attr_int("accum") : 1;
  r.world_size = g.read_attr_int("world_size");
  r.replicate = g.read_attr_int("replicate");
  if (r.world_size < 1 || r.replicate < 1 || r.world_size % r.replicate != 0)
    throw InputError(fmt::format("'{}': world size {} and replicate {} are not a valid layout",
                                 g.where(""), r.world_size, r.replicate));
  r.tp = g.has_attr("tp") ? g.read_attr_int("tp") : 1;
  if (r.tp < 1 || r.world_size % (r.replicate * r.tp) != 0)
    throw InputError(fmt::format(
        "'{}': tp {} is not a valid layout for world size {} and replicate {} (valid: T >= 1 "
        "with world = R x G x T)",
        g.where(""), r.tp, r.world_size, r.replicate));
  if (g.has_attr("compute")) {
    r.compute = g.read_attr_string("compute");
    r.global_samples = g.read_attr_int("global_samples");
    r.steps = g.read_attr_int("steps");
    r.warmup = g.read_attr_int("warmup");
    r.seed = g.read_attr_int("seed");
    r.sets = g.read_attr_string("sets");
    r.plan_options = g.read_attr_string("plan_options");
  } else {
    // Schema 1: the inputs live in the config text only.
    const auto& c = r.config_text;
    const std::string compute = config_value(c, "compute");
    r.compute = compute.empty() ? "gemm" : compute;
    const auto global = to_int(config_value(c, "global_tokens"), 0);
    const auto tokens = to_int(config_value(c, "tokens"), 0);
    r.global_samples = global > 0 ? global : tokens * (r.world_size / r.replicate);
    r.steps = to_int(config_value(c, "steps"), 0);
    r.warmup = to_int(config_value(c, "warmup"), -1);
    r.seed = to_int(config_value(c, "seed"), -1);
  }

  {
    const auto topo = g.open_group("topology");
    const auto m = topo.open_group("modules");
    r.modules.path = m.read_strings("path");
    r.modules.type = m.read_strings("type");
    r.modules.parent = m.read_ints("parent");
    require_size(m, "type", r.modules.type.size(), r.modules.path.size());
    require_size(m, "parent", r.modules.parent.size(), r.modules.path.size());

    const auto p = topo.open_group("params");
    auto& t = r.params;
    t.name = p.read_strings("name");
    const std::size_t n = t.name.size();
    const auto ndim = p.read_ints("ndim");
    std::vector<hsize_t> dims;
    const auto shape = p.read_ints("shape", &dims);
    require_size(p, "ndim", ndim.size(), n);
    if (dims.size() != 2 || dims[0] != n)
      throw InputError(fmt::format("'{}': expected an n x maxdim array", p.where("shape")));
    const std::size_t maxdim = static_cast<std::size_t>(dims[1]);
    for (std::size_t i = 0; i < n; ++i) {
      const auto nd = static_cast<std::size_t>(ndim[i]);
      if (nd > maxdim) throw InputError(fmt::format("'{}': ndim too large", p.where("ndim")));
      t.shape.emplace_back(shape.begin() + static_cast<std::ptrdiff_t>(i * maxdim),
                           shape.begin() + static_cast<std::ptrdiff_t>(i * maxdim + nd));
    }
    t.dtype = p.read_strings("dtype");
    t.dedicated = p.read_ints("dedicated");
    t.owner_rank = p.read_ints("owner_rank");
    t.site = p.read_ints("site");
    t.cost = p.read_ints("cost");
    require_size(p, "dtype", t.dtype.size(), n);
    require_size(p, "dedicated", t.dedicated.size(), n);
    require_size(p, "owner_rank", t.owner_rank.size(), n);
    require_size(p, "site", t.site.size(), n);
    require_size(p, "cost", t.cost.size(), n);
    read_tp_columns(p, r.tp, t);
  }
  {
    const auto b = g.open_group("boundary");
    r.boundary_spec = b.read_attr_string("spec");
    r.boundary_label = b.read_attr_string("label");
    r.strict = b.read_attr_int("strict") != 0;
    r.suggested_boundary = b.read_attr_string("suggested_boundary");
    r.boundary_warnings = b.read_strings("warnings");
    const auto s = b.open_group("sites");
    r.sites.path = s.read_strings("path");
    r.sites.type = s.read_strings("type");
    r.sites.param_count = s.read_ints("param_count");
    r.sites.numel = s.read_ints("numel");
    r.sites.bytes = s.read_ints("bytes");
    const std::size_t n = r.sites.path.size();
    require_size(s, "type", r.sites.type.size(), n);
    require_size(s, "param_count", r.sites.param_count.size(), n);
    require_size(s, "numel", r.sites.numel.size(), n);
    require_size(s, "bytes", r.sites.bytes.size(), n);
    const auto count = s.read_ints("owner_count");
    const auto flat = s.read_ints("owners");
    require_size(s, "owner_count", count.size(), n);
    std::size_t pos = 0;
    for (std::int64_t c : count) {
      if (c < 0 || pos + static_cast<std::size_t>(c) > flat.size())
        throw InputError(
            fmt::format("'{}': owner counts exceed the owner list", s.where("owner_count")));
      r.sites.owners.emplace_back(flat.begin() + static_cast<std::ptrdiff_t>(pos),
                                  flat.begin() + static_cast<std::ptrdiff_t>(pos + c));
      pos += static_cast<std::size_t>(c);
    }
  }
  {
    const auto p = g.open_group("partition");
    auto& q = r.partition;
    q.strategy = p.read_attr_string("strategy");
    q.cost_model = p.read_attr_string("cost_model");
    q.shard = p.read_attr_int("shard");
    q.replicate = p.read_attr_int("replicate");
    q.num_units = p.read_attr_int("num_units");
    q.packed_units = p.read_attr_int("packed_units");
    q.total_cost = p.read_attr_int("total_cost");
    q.makespan = p.read_attr_int("makespan");
    q.lower_bound = p.read_attr_double("lower_bound");
    q.ratio = p.read_attr_double("ratio");
    q.imbalance_all = p.read_attr_double("imbalance_all");
    q.imbalance_nonempty = p.read_attr_double("imbalance_nonempty");
    q.empty_slots = p.read_attr_int("empty_slots");
    q.key_collisions = p.read_attr_int("key_collisions");
    q.slot_rank = p.read_ints("slot_rank");
    q.numel_loads = p.read_ints("numel_loads");
    q.cost_loads = p.read_ints("cost_loads");
    require_size(p, "numel_loads", q.numel_loads.size(), q.slot_rank.size());
    require_size(p, "cost_loads", q.cost_loads.size(), q.slot_rank.size());
  }
  {
    const auto tg = g.open_group("timings");
    auto& t = r.timings;
    t.phases = tg.read_strings("phases");
    std::vector<hsize_t> dims;
    t.seconds = tg.read_doubles("seconds", &dims);
    if (dims.size() != 3 || dims[2] != t.phases.size())
      throw InputError(fmt::format("'{}': expected steps x ranks x phases", tg.where("seconds")));
    t.steps = static_cast<std::int64_t>(dims[0]);
    t.ranks = static_cast<std::int64_t>(dims[1]);
    if (t.steps > 0 && t.ranks != r.world_size)
      throw InputError(fmt::format("'{}': {} ranks, the run has world size {}", tg.where("seconds"),
                                   t.ranks, r.world_size));
    if (tg.has("step_seconds")) {
      std::vector<hsize_t> sd;
      t.step_seconds = tg.read_doubles("step_seconds", &sd);
      if (sd.size() != 2 || sd[0] != dims[0] || sd[1] != dims[1])
        throw InputError(
            fmt::format("'{}': expected steps x ranks like seconds", tg.where("step_seconds")));
    }
    t.repeats = tg.has_attr("repeats") ? tg.read_attr_int("repeats") : 1;
    if (t.repeats < 1 || (t.steps > 0 && t.steps % t.repeats != 0))
      throw InputError(fmt::format("'{}': {} repeats do not divide {} samples",
                                   tg.where("@repeats"), t.repeats, t.steps));
  }
  {
    const auto cg = g.open_group("collectives");
    auto& c = r.collectives;
    c.kinds = cg.read_strings("kinds");
    std::vector<hsize_t> dims;
    c.calls_per_step = cg.read_ints("calls_per_step", &dims);
    if (dims.size() != 2 || dims[0] != c.kinds.size())
      throw InputError(fmt::format("'{}': expected kinds x ranks", cg.where("calls_per_step")));
    c.ranks = static_cast<std::int64_t>(dims[1]);
    if (!c.kinds.empty() && c.ranks != r.world_size)
      throw InputError(fmt::format("'{}': {} ranks, the run has world size {}",
                                   cg.where("calls_per_step"), c.ranks, r.world_size));
    c.bytes_per_rank_per_step = cg.read_ints("bytes_per_rank_per_step");
    c.formula_bytes_per_rank_per_step = cg.read_ints("formula_bytes_per_rank_per_step");
    require_size(cg, "bytes_per_rank_per_step", c.bytes_per_rank_per_step.size(),
                 c.calls_per_step.size());
    require_size(cg, "formula_bytes_per_rank_per_step", c.formula_bytes_per_rank_per_step.size(),
                 c.calls_per_step.size());
    if (cg.has("in_flight_seconds")) {  // optional: files from before the bandwidth figures
      c.message_bytes_per_step = cg.read_doubles("message_bytes_per_step");
      c.group_size = cg.read_ints("group_size");
      c.in_flight_seconds = cg.read_doubles("in_flight_seconds");
      require_size(cg, "message_bytes_per_step", c.message_bytes_per_step.size(), c.kinds.size());
      require_size(cg, "group_size", c.group_size.size(), c.kinds.size());
      require_size(cg, "in_flight_seconds", c.in_flight_seconds.size(), c.kinds.size());
    }
    for (const auto& k : c.kinds)
      if (r.tp == 1 && (k == "tp_gather" || k == "tp_scatter"))
        throw InputError(fmt::format("'{}': kind {} in a run with tp 1 (valid only with tp > 1)",
                                     cg.where("kinds"), k));
  }
  {
    const auto mg = g.open_group("memory");
    const auto names = mg.read_strings("name");
    const auto bytes = mg.read_ints("bytes");
    require_size(mg, "bytes", bytes.size(), names.size());
    for (std::size_t i = 0; i < names.size(); ++i) r.memory[names[i]] = bytes[i];
  }
  {
    const auto sg = g.open_group("summary");
    for (const auto& name : sg.attr_names()) {
      switch (sg.attr_kind(name)) {
        case h5::AttrKind::integer:
        case h5::AttrKind::floating: r.summary[name] = sg.read_attr_double(name); break;
        case h5::AttrKind::string: r.summary_text[name] = sg.read_attr_string(name); break;
        case h5::AttrKind::other:
          throw InputError(fmt::format("'{}': unsupported attribute type", sg.where(name)));
      }
    }
  }
  return r;
}

}  // namespace

namespace {

ResultsFile read_file(const std::string& path) {
  const auto f = h5::File::open_read(path);
  if (!f.has_attr("format") || f.attr_kind("format") != h5::AttrKind::string ||
      f.read_attr_string("format") != kFormatName)
    throw InputError(fmt::format("'{}' is not a dmuon results file (no format = '{}' attribute)",
                                 path, kFormatName));
  ResultsFile out;
  auto& p = out.provenance;
  p.schema_version = f.read_attr_string("schema_version");
  if (p.schema_version != kSchemaVersion && p.schema_version != kOldestSchemaVersion)
    throw InputError(
        fmt::format("'{}': unsupported results schema version '{}' (supported: {} to {})", path,
                    p.schema_version, kOldestSchemaVersion, kSchemaVersion));
  p.suite_version = f.read_attr_string("suite_version");
  p.git_commit = f.read_attr_string("git_commit");
  p.build_type = f.read_attr_string("build_type");
  p.compiler = f.read_attr_string("compiler");
  p.mpi_version = f.read_attr_string("mpi_version");
  p.kokkos_version = f.read_attr_string("kokkos_version");
  p.hdf5_version = f.read_attr_string("hdf5_version");
  p.cuda_version = f.read_attr_string("cuda_version");
  p.nccl_version = f.read_attr_string("nccl_version");
  p.hostnames = split_hosts(f.read_attr_string("hostnames"));
  if (f.has_attr("device")) {
    p.device = f.read_attr_string("device");
    p.device_model = f.read_attr_string("device_model");
    p.cpu_features = f.read_attr_string("cpu_features");
    p.blas_library = f.read_attr_string("blas_library");
    p.blas_core = f.read_attr_string("blas_core");
    p.sgemm_gflops = f.read_attr_double("sgemm_gflops");
    p.sgemm_size = f.read_attr_int("sgemm_size");
  }
  // Files written before it existed have none.
  if (f.has_attr("scheduler_job")) p.scheduler_job = f.read_attr_string("scheduler_job");
  if (f.has_attr("transport_settings"))
    p.transport_settings = f.read_attr_string("transport_settings");
  p.date_utc = f.read_attr_string("date_utc");
  p.command_line = f.read_attr_string("command_line");
  p.world_size = f.read_attr_int("world_size");
  p.replicate = f.read_attr_int("replicate");
  const auto n = f.read_attr_int("num_runs");
  const auto runs = f.open_group("runs");
  const auto children = runs.children();
  if (n < 0 || static_cast<std::size_t>(n) != children.size())
    throw InputError(
        fmt::format("'{}': num_runs is {} but /runs holds {} groups", path, n, children.size()));
  for (std::int64_t i = 0; i < n; ++i)
    out.runs.push_back(read_run(runs.open_group(std::to_string(i))));
  return out;
}

// HDF5 1.10 trusts a file's metadata: some damaged files make it crash (SIGSEGV) or loop. So
// the first read happens in a child process; only when it finished cleanly does this process
// read the file itself. The child reports an error as one line through a pipe.
// The bound is the time a loop in the library may cost before the file is called damaged: a
// results file of 16,384 projected ranks reads in well under a second.
constexpr int kReadTimeoutS = 10;

void read_in_child_first(const std::string& path) {
  int fds[2];
  if (::pipe(fds) != 0) return;  // cannot isolate: read directly (best effort)
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return;
  }
  if (child == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);     // never an orphan spinning on the file
    if (::getppid() != parent) ::_exit(3);  // the parent died before prctl
    ::close(fds[0]);
    // The child speaks only through the pipe: whatever the library (or a sanitizer) prints
    // while it chokes on the file must not reach the user's terminal as a second message.
    const int devnull = ::open("/dev/null", O_WRONLY);
    if (devnull >= 0) ::dup2(devnull, STDERR_FILENO);
    int code = 0;
    std::string msg;
    try {
      (void)read_file(path);
    } catch (const InputError& e) {
      code = 2;
      msg = e.what();
    } catch (const std::exception& e) {
      code = 3;
      msg = e.what();
    }
    std::size_t off = 0;
    while (off < msg.size()) {
      const ssize_t n = ::write(fds[1], msg.data() + off, msg.size() - off);
      if (n <= 0) break;
      off += static_cast<std::size_t>(n);
    }
    ::_exit(code);  // no atexit handlers, no second flush of the parent's buffers
  }
  ::close(fds[1]);
  std::string msg;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kReadTimeoutS);
  bool timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd pfd{fds[0], POLLIN, 0};
    const int r = ::poll(&pfd, 1, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      timed_out = r == 0;
      break;
    }
    char buf[4096];
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the child is done
    if (msg.size() < 65536) msg.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(child, SIGKILL);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out)
    throw InputError(
        fmt::format("'{}' is damaged: reading it did not finish within {} s", path, kReadTimeoutS));
  if (WIFSIGNALED(status))
    throw InputError(fmt::format("'{}' is damaged: its metadata crashes the HDF5 library ({})",
                                 path, strsignal(WTERMSIG(status))));
  if (WIFEXITED(status) && WEXITSTATUS(status) == 2) throw InputError(msg);
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
    throw InputError(fmt::format(
        "'{}' is damaged or not a readable dmuon results file: {}", path,
        msg.empty() ? fmt::format("reading it failed (exit status {})", WEXITSTATUS(status))
                    : msg));
}

}  // namespace

ResultsFile read_results(const std::string& path) {
  try {
    read_in_child_first(path);
    return read_file(path);
  } catch (const InputError&) {
    throw;
  } catch (const std::exception& e) {
    // HDF5 failures (RuntimeFailure), bad_alloc, out_of_range on damaged content: one line,
    // exit 2, naming the file.
    throw InputError(
        fmt::format("'{}' is damaged or not a readable dmuon results file: {}", path, e.what()));
  }
}

}  // namespace dmuon::results
