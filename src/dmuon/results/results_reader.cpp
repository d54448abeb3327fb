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
#include "dmuon/results/channel.hpp"
#include "dmuon/results/h5.hpp"
#include "dmuon/results/schema_h5.hpp"

namespace dmuon::results {
namespace {

// The TP columns of the params table (written with tp > 1; absent in older files): every
// parameter's shard dimension is -1, 0 or 1, and its local numel is numel / T when sharded
// (numel otherwise).
void check_tp_columns(const h5::Group& p, std::int64_t tp, const ParamTable& t) {
  if (t.tp_shard_dim.empty() && t.tp_local_numel.empty()) return;
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

// World size, replicate and T must form the grid world = R x G x T.
void check_layout(const h5::Group& g, const RunRecord& r) {
  if (r.world_size < 1 || r.replicate < 1 || r.world_size % r.replicate != 0)
    throw InputError(fmt::format("'{}': world size {} and replicate {} are not a valid layout",
                                 g.where(""), r.world_size, r.replicate));
  if (r.tp < 1 || r.world_size % (r.replicate * r.tp) != 0)
    throw InputError(fmt::format(
        "'{}': tp {} is not a valid layout for world size {} and replicate {} (valid: T >= 1 "
        "with world = R x G x T)",
        g.where(""), r.tp, r.world_size, r.replicate));
}

// Each parameter's shape: row i of the n x maxdim `shape` array, its first ndim[i] entries.
void read_shapes(const h5::Group& p, ParamTable& t) {
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
}

void read_topology(const h5::Group& g, RunRecord& r) {
  const auto topo = g.open_group("topology");
  read_columns(topo.open_group("modules"), module_columns(), r.modules);
  const auto p = topo.open_group("params");
  read_columns(p, param_columns(), r.params);
  read_shapes(p, r.params);
  check_tp_columns(p, r.tp, r.params);
}

// Site i's owners are the next owner_count[i] entries of the flattened `owners`.
void read_site_owners(const h5::Group& s, SiteTable& sites) {
  const auto count = s.read_ints("owner_count");
  const auto flat = s.read_ints("owners");
  require_size(s, "owner_count", count.size(), sites.path.size());
  std::size_t pos = 0;
  for (std::int64_t c : count) {
    if (c < 0 || pos + static_cast<std::size_t>(c) > flat.size())
      throw InputError(
          fmt::format("'{}': owner counts exceed the owner list", s.where("owner_count")));
    sites.owners.emplace_back(flat.begin() + static_cast<std::ptrdiff_t>(pos),
                              flat.begin() + static_cast<std::ptrdiff_t>(pos + c));
    pos += static_cast<std::size_t>(c);
  }
}

void read_boundary(const h5::Group& g, RunRecord& r) {
  const auto b = g.open_group("boundary");
  read_fields(b, run_fields(), r, "boundary");
  r.boundary_warnings = b.read_strings("warnings");
  const auto s = b.open_group("sites");
  read_columns(s, site_columns(), r.sites);
  read_site_owners(s, r.sites);
}

void read_partition(const h5::Group& g, RunRecord& r) {
  const auto p = g.open_group("partition");
  read_fields(p, run_fields(), r, "partition");
  read_columns(p, slot_columns(), r.partition);
}

void read_timings(const h5::Group& g, RunRecord& r) {
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
    throw InputError(fmt::format("'{}': {} repeats do not divide {} samples", tg.where("@repeats"),
                                 t.repeats, t.steps));
}

// Optional: files from before the bandwidth figures have none.
void read_bandwidths(const h5::Group& cg, Collectives& c) {
  if (!cg.has("in_flight_seconds")) return;
  c.message_bytes_per_step = cg.read_doubles("message_bytes_per_step");
  c.group_size = cg.read_ints("group_size");
  c.in_flight_seconds = cg.read_doubles("in_flight_seconds");
  require_size(cg, "message_bytes_per_step", c.message_bytes_per_step.size(), c.kinds.size());
  require_size(cg, "group_size", c.group_size.size(), c.kinds.size());
  require_size(cg, "in_flight_seconds", c.in_flight_seconds.size(), c.kinds.size());
}

void read_collectives(const h5::Group& g, RunRecord& r) {
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
  read_bandwidths(cg, c);
  for (const auto& k : c.kinds) {
    const auto channel = parse_channel(k);
    if (r.tp == 1 && channel && channel->group == CommGroup::tp)
      throw InputError(fmt::format("'{}': kind {} in a run with tp 1 (valid only with tp > 1)",
                                   cg.where("kinds"), k));
  }
}

void read_memory(const h5::Group& g, RunRecord& r) {
  const auto mg = g.open_group("memory");
  const auto names = mg.read_strings("name");
  const auto bytes = mg.read_ints("bytes");
  require_size(mg, "bytes", bytes.size(), names.size());
  for (std::size_t i = 0; i < names.size(); ++i) r.memory[names[i]] = bytes[i];
}

// Every attribute: numbers (int64 or float64) into `summary`, strings into `summary_text`.
void read_summary(const h5::Group& g, RunRecord& r) {
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

RunRecord read_run(const h5::Group& g) {
  RunRecord r;
  read_summary(g, r);  // first: older files' run fields derive from it (run_options)
  read_fields(g, run_fields(), r, "");
  check_layout(g, r);
  read_topology(g, r);
  read_boundary(g, r);
  read_partition(g, r);
  read_timings(g, r);
  read_collectives(g, r);
  read_memory(g, r);
  return r;
}

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
  read_fields(f, provenance_fields(), p, "");
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

// In the child: read the file, write any error message to `fd`, exit 2 for bad input, 3 for
// anything else, 0 when the file read cleanly.
[[noreturn]] void read_as_child(const std::string& path, pid_t parent, int fd) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);     // never an orphan spinning on the file
  if (::getppid() != parent) ::_exit(3);  // the parent died before prctl
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
    const ssize_t n = ::write(fd, msg.data() + off, msg.size() - off);
    if (n <= 0) break;
    off += static_cast<std::size_t>(n);
  }
  ::_exit(code);  // no atexit handlers, no second flush of the parent's buffers
}

// In the parent: what the child wrote to `fd` until it closed it (at most 64 KiB kept);
// false when kReadTimeoutS passed first.
bool collect_child_message(int fd, std::string& msg) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kReadTimeoutS);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) return false;
    pollfd pfd{fd, POLLIN, 0};
    const int r = ::poll(&pfd, 1, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return r != 0;
    char buf[4096];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return true;  // EOF: the child is done
    if (msg.size() < 65536) msg.append(buf, static_cast<std::size_t>(n));
  }
}

// The child's verdict on the file as the InputError the user sees; nothing when it read cleanly.
void throw_child_verdict(const std::string& path, bool timed_out, int status,
                         const std::string& msg) {
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
    ::close(fds[0]);
    read_as_child(path, parent, fds[1]);
  }
  ::close(fds[1]);
  std::string msg;
  const bool timed_out = !collect_child_message(fds[0], msg);
  ::close(fds[0]);
  if (timed_out) ::kill(child, SIGKILL);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  throw_child_verdict(path, timed_out, status, msg);
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
