#include "dmuon/project/machine_model.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
// yaml-cpp's node headers trip GCC 12's -Wdangling-pointer (a false positive in its inline
// code); silence it for those headers only, as config_file.cpp does.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdangling-pointer"
#include <yaml-cpp/yaml.h>
#pragma GCC diagnostic pop
#else
#include <yaml-cpp/yaml.h>
#endif

#include <dirent.h>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "dmuon/base/abbreviate.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/base/input_file.hpp"
#include "dmuon/engine/step/step_op.hpp"

namespace dmuon::project {

const char* device_kind_name(DeviceKind d) {
  return d == DeviceKind::gpu ? "gpu" : "cpu";
}

namespace {

// The physical range of a machine-file number (as the message states it), and whether 0 (off)
// is allowed besides.
struct Range {
  double lo, hi;
  const char* text;
  bool zero_ok = false;
};

// A node's text as quoted in a message, cut to a readable length.
std::string shown(const YAML::Node& v) {
  if (v.IsSequence()) return "a sequence";
  if (v.IsMap()) return "a mapping";
  return abbreviate_value(v.Scalar());
}

constexpr Range kPeak{1e-6, 1e6, "1e-6..1e6 TFLOP/s"};
constexpr Range kEfficiency{1e-3, 1, "0.001..1"};
// Up to 1e12 GB/s: a model may make a term free (the projection tests do); the lower bound
// keeps the replay's times within its clock's resolution.
constexpr Range kBandwidth{1e-3, 1e12, "1e-3..1e12 GB/s"};
constexpr Range kMicroseconds{0, 1e6, "0..1e6 us"};
constexpr int kMaxRanksPerNode = 1 << 20;

// Reads one mapping, rejecting keys outside `valid` with the list of valid ones.
class MapReader {
 public:
  MapReader(const YAML::Node& node, std::string where, const std::string& source,
            std::vector<std::string> valid)
      : node_(node), where_(std::move(where)), source_(source), valid_(std::move(valid)) {
    if (!node.IsMap()) fail(node, fmt::format("{} must be a mapping", where_));
    for (auto it = node.begin(); it != node.end(); ++it) {
      const std::string key = it->first.Scalar();
      if (std::find(valid_.begin(), valid_.end(), key) == valid_.end())
        fail(it->first, fmt::format("unknown key '{}' in {} (valid keys: {})", key, where_,
                                    fmt::join(valid_, ", ")));
      if (!seen_.insert(key).second)
        fail(it->first, fmt::format("duplicate key '{}' in {}", key, where_));
    }
  }

  [[noreturn]] void fail(const YAML::Node& at, const std::string& what) const {
    throw InputError(fmt::format("machine file {}:{}: {}", source_, at.Mark().line + 1, what));
  }

  bool has(const std::string& key) const { return seen_.count(key) > 0; }
  YAML::Node get(const std::string& key) const {
    if (!has(key)) fail(node_, fmt::format("{} has no '{}'", where_, key));
    return node_[key];
  }

  std::string text(const std::string& key) const {
    const YAML::Node v = get(key);
    if (!v.IsScalar()) fail(v, fmt::format("{}.{} must be a single value", where_, key));
    return v.Scalar();
  }

  // A finite number in [range.lo, range.hi] (or exactly 0 where range.zero_ok): values outside
  // a physical range make the replay's times nonsense or too coarse to advance (1e308 us).
  double number(const std::string& key, const Range& range) const {
    const YAML::Node v = get(key);
    double x = 0;
    const bool parsed = v.IsScalar() && YAML::convert<double>::decode(v, x) && std::isfinite(x);
    const bool in_range = (range.zero_ok && x == 0) || (x >= range.lo && x <= range.hi);
    if (!parsed || !in_range)
      fail(v, fmt::format("{}.{} is {} (valid: {}{})", where_, key, shown(v),
                          range.zero_ok ? "0 or " : "", range.text));
    return x;
  }
  double number_or(const std::string& key, double fallback, const Range& range) const {
    return has(key) ? number(key, range) : fallback;
  }

  int integer(const std::string& key, int lo, int hi) const {
    const YAML::Node v = get(key);
    long long x = 0;
    if (!v.IsScalar() || !YAML::convert<long long>::decode(v, x) || x < lo || x > hi)
      fail(v, fmt::format("{}.{} is {} (valid: an integer {}..{})", where_, key, shown(v), lo, hi));
    return static_cast<int>(x);
  }

  const std::string& where() const { return where_; }

 private:
  YAML::Node node_;
  std::string where_;
  const std::string& source_;
  std::vector<std::string> valid_;
  std::set<std::string> seen_;
};

const char* const kKindKeys[] = {"broadcast",  "reduce", "reduce_scatter", "all_gather",
                                 "all_reduce", "gather", "scatter",        "all_to_all"};

// The step-work keys (attention, memory-bound kernels, launches): optional.
void read_step_work_keys(const MapReader& c, Machine& m) {
  auto& s = m.compute;
  if (c.has("attention_efficiency")) {
    const MapReader a(c.get("attention_efficiency"), "compute.attention_efficiency", m.source,
                      {"forward", "backward"});
    s.attention_forward_efficiency = a.number("forward", kEfficiency);
    s.attention_backward_efficiency = a.number("backward", kEfficiency);
  }
  if (c.has("attention_kernels")) {
    const YAML::Node kernels = c.get("attention_kernels");
    if (!kernels.IsMap()) c.fail(kernels, "compute.attention_kernels must be a mapping");
    if (!(s.attention_forward_efficiency > 0))
      c.fail(kernels, "compute.attention_kernels needs compute.attention_efficiency (the default)");
    for (auto it = kernels.begin(); it != kernels.end(); ++it) {
      const std::string name = it->first.IsScalar() ? it->first.Scalar() : "";
      const bool word = !name.empty() && std::all_of(name.begin(), name.end(), [](char ch) {
        return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_';
      });
      if (!word)
        c.fail(it->first,
               "compute.attention_kernels: a kernel's name must be a word (valid: "
               "letters, digits, '-' and '_', e.g. cudnn)");
      if (name == kDefaultAttentionKernel)
        c.fail(it->first, fmt::format("compute.attention_kernels: '{}' names "
                                      "attention_efficiency (valid: another name)",
                                      name));
      const MapReader k(it->second, "compute.attention_kernels." + name, m.source,
                        {"forward", "backward"});
      s.attention_kernels[name] = {k.number("forward", kEfficiency),
                                   k.number("backward", kEfficiency)};
    }
  }
  s.memory_bound_efficiency =
      c.number_or("memory_bound_efficiency", s.memory_efficiency, kEfficiency);
  s.launch_us = c.number_or("launch_us", 0.0, kMicroseconds);
}

void read_compute(const MapReader& top, Machine& m) {
  const MapReader c(
      top.get("compute"), "compute", m.source,
      {"peak_tflops", "gemm_efficiency", "gemm_half_dim", "sm_count", "gemm_tile",
       "memory_bandwidth_GBps", "memory_efficiency", "kernel_overhead_us",
       "synthetic_elements_per_s", "cores", "attention_efficiency", "memory_bound_efficiency",
       "launch_us", "fp8_gemm_efficiency", "attention_kernels"});
  const MapReader peak(c.get("peak_tflops"), "compute.peak_tflops", m.source,
                       {"fp32", "bf16", "fp16", "fp8"});
  auto& s = m.compute;
  s.peak_tflops[static_cast<std::size_t>(kernels::Dtype::f32)] = peak.number("fp32", kPeak);
  // The host computes in fp32 only; a GPU needs every type the engine can run.
  const bool gpu = m.device == DeviceKind::gpu;
  for (auto [key, t] : {std::pair{"bf16", kernels::Dtype::bf16}, {"fp16", kernels::Dtype::f16}})
    s.peak_tflops[static_cast<std::size_t>(t)] =
        gpu ? peak.number(key, kPeak) : peak.number_or(key, peak.number("fp32", kPeak), kPeak);
  s.gemm_efficiency = c.number("gemm_efficiency", kEfficiency);
  s.fp8_peak_tflops = peak.has("fp8") ? peak.number("fp8", kPeak) : 0.0;
  s.fp8_gemm_efficiency = c.number_or("fp8_gemm_efficiency", s.gemm_efficiency, kEfficiency);
  s.gemm_half_dim = c.number_or("gemm_half_dim", 0.0, {0, 1e6, "0..1e6 elements"});
  s.sm_count = c.has("sm_count") ? c.integer("sm_count", 0, 1 << 20) : 0;
  if (c.has("gemm_tile")) {
    const YAML::Node t = c.get("gemm_tile");
    long long a = 0, b = 0;
    if (!t.IsSequence() || t.size() != 2 || !YAML::convert<long long>::decode(t[0], a) ||
        !YAML::convert<long long>::decode(t[1], b) || a < 1 || b < 1 || a > 4096 || b > 4096)
      c.fail(t, "compute.gemm_tile must be [rows, cols] of a thread block's output tile (1..4096)");
    s.tile_m = static_cast<int>(a);
    s.tile_n = static_cast<int>(b);
  }
  s.memory_bandwidth_gbps = c.number("memory_bandwidth_GBps", kBandwidth);
  s.memory_efficiency = c.number_or("memory_efficiency", 1.0, kEfficiency);
  s.kernel_overhead_us = c.number_or("kernel_overhead_us", 0.0, kMicroseconds);
  s.synthetic_elements_per_s =
      c.number_or("synthetic_elements_per_s", 0.0, {1, 1e15, "1..1e15 elements/s", true});
  s.cores = c.has("cores") ? c.integer("cores", 1, kMaxRanksPerNode) : 0;
  read_step_work_keys(c, m);
}

void read_network(const MapReader& top, Machine& m) {
  const MapReader n(top.get("network"), "network", m.source, {"intra", "inter", "measured"});
  // A link level: its bus bandwidth and the SMs its collective kernels hold. Every stream may
  // run one collective at once (engine::kStreamCount), and they must leave SMs to compute on.
  auto link = [&](const char* level, LinkSpec& l) {
    const std::string where = std::string("network.") + level;
    const MapReader r(n.get(level), where, m.source, {"busbw_GBps", "collective_sms"});
    l.busbw_gbps = r.number("busbw_GBps", kBandwidth);
    if (!r.has("collective_sms")) return;
    const int sms = m.compute.sm_count;
    const int most = sms > 0 ? (sms - 1) / engine::kStreamCount : 0;
    if (m.device != DeviceKind::gpu || most < 1)
      r.fail(r.get("collective_sms"),
             fmt::format("{}.collective_sms needs a GPU machine with compute.sm_count", where));
    // At most: the streams' collectives at once still leave an SM to compute on.
    l.collective_sms = r.integer("collective_sms", 0, most);
  };
  link("intra", m.intra);
  if (n.has("inter")) link("inter", m.inter);
  if (!n.has("measured")) return;
  std::vector<std::string> keys = {"ranks"};
  for (const char* k : kKindKeys) keys.emplace_back(k);
  const MapReader meas(n.get("measured"), "network.measured", m.source, keys);
  m.measured.ranks = meas.integer("ranks", 1, 1 << 30);
  for (std::size_t i = 0; i < comm::kCollectiveKindCount; ++i) {
    const std::string kind = comm::collective_kind_name(comm::kAllCollectiveKinds[i]);
    if (!meas.has(kind)) continue;
    const MapReader k(meas.get(kind), "network.measured." + kind, m.source,
                      {"latency_us", "busbw_GBps"});
    m.measured.kinds[static_cast<std::size_t>(comm::kAllCollectiveKinds[i])] = MeasuredCollective{
        k.number("latency_us", kMicroseconds), k.number("busbw_GBps", kBandwidth)};
  }
}

bool is_path(const std::string& spec) {
  auto ends = [&](const char* suffix) {
    const std::string s(suffix);
    return spec.size() >= s.size() && spec.compare(spec.size() - s.size(), s.size(), s) == 0;
  };
  return spec.find('/') != std::string::npos || ends(".yaml") || ends(".yml");
}

}  // namespace

std::vector<std::string> machine_names(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (const dirent* e = readdir(d)) {
      const std::string f = e->d_name;
      if (f.size() > 5 && f.compare(f.size() - 5, 5, ".yaml") == 0)
        names.push_back(f.substr(0, f.size() - 5));
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

Machine parse_machine(const std::string& text, const std::string& source) {
  Machine m;
  m.source = source;
  m.text = text;
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw InputError(fmt::format("machine file {}:{}:{}: YAML syntax error: {}", source,
                                 e.mark.line + 1, e.mark.column + 1, e.msg));
  }
  if (!root.IsMap())
    throw InputError(fmt::format("machine file {}: not a mapping of machine keys", source));
  const MapReader top(root, "the machine", m.source,
                      {"name", "description", "device", "ranks_per_node", "nvlink_domain",
                       "memory_GB", "compute", "network"});
  m.name = top.text("name");
  if (m.name.empty() ||
      m.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789._-") != std::string::npos)
    top.fail(
        top.get("name"),
        fmt::format("name '{}' is invalid (lower-case letters, digits, '.', '_', '-')", m.name));
  if (top.has("description")) m.description = top.text("description");
  const std::string device = top.text("device");
  if (device == "gpu")
    m.device = DeviceKind::gpu;
  else if (device == "cpu")
    m.device = DeviceKind::cpu;
  else
    top.fail(top.get("device"), fmt::format("device '{}' is invalid (valid: gpu, cpu)", device));
  m.ranks_per_node = top.integer("ranks_per_node", 1, kMaxRanksPerNode);
  m.nvlink_domain = top.integer("nvlink_domain", 1, kMaxRanksPerNode);
  m.memory_gb = top.number_or("memory_GB", 0.0,
                              {1e-3, 1e6, "1e-3..1e6 GB"});  // optional: absent = no capacity check
  read_compute(top, m);
  read_network(top, m);
  return m;
}

Machine read_machine_file(const std::string& path) {
  // A regular file of at most 1 MiB: a FIFO or /dev/zero named as a machine is refused, never
  // read until memory runs out (base/input_file.hpp).
  return parse_machine(read_regular_file(path, "machine file", std::int64_t{1} << 20), path);
}

Machine load_machine(const std::string& spec, const std::string& machines_dir) {
  if (spec.empty())
    throw InputError("--machine is empty (a name in configs/machines or a YAML file)");
  if (is_path(spec)) return read_machine_file(spec);
  const auto names = machine_names(machines_dir);
  if (std::find(names.begin(), names.end(), spec) == names.end())
    throw InputError(
        fmt::format("unknown machine '{}' (valid: {}; or a path to a YAML file)", spec,
                    names.empty() ? "none found" : fmt::format("{}", fmt::join(names, ", "))));
  return read_machine_file(machines_dir + "/" + spec + ".yaml");
}

double compute_share(const Machine& m, int world) {
  if (m.compute.cores <= 0) return 1.0;
  const int ranks = std::min(std::max(1, world), m.ranks_per_node);
  return std::max(1.0, static_cast<double>(ranks) / m.compute.cores);
}

Machine with_attention_kernel(Machine m, const std::string& name) {
  if (name == kDefaultAttentionKernel) return m;
  auto& c = m.compute;
  const auto it = c.attention_kernels.find(name);
  if (it == c.attention_kernels.end()) {
    std::vector<std::string> valid{kDefaultAttentionKernel};
    for (const auto& k : c.attention_kernels) valid.push_back(k.first);
    throw InputError(fmt::format(
        "--attention-kernel {}: machine '{}' gives no rates for it (valid: {}; a machine file "
        "lists its kernels under compute.attention_kernels)",
        name.empty() ? "''" : name, m.name, fmt::join(valid, ", ")));
  }
  c.attention_forward_efficiency = it->second.first;
  c.attention_backward_efficiency = it->second.second;
  return m;
}

std::string to_yaml(const Machine& m, const std::string& comment) {
  std::string s;
  std::istringstream lines(comment);
  for (std::string line; std::getline(lines, line);) s += "# " + line + "\n";
  const auto& c = m.compute;
  auto num = [](double x) { return fmt::format("{:.6g}", x); };
  s += fmt::format("name: {}\n", m.name);
  if (!m.description.empty()) s += fmt::format("description: \"{}\"\n", m.description);
  s += fmt::format("device: {}\n", device_kind_name(m.device));
  s += fmt::format("ranks_per_node: {}\nnvlink_domain: {}\n", m.ranks_per_node, m.nvlink_domain);
  if (m.memory_gb > 0) s += fmt::format("memory_GB: {}\n", num(m.memory_gb));
  s += "compute:\n";
  s += fmt::format("  peak_tflops: {{fp32: {}, bf16: {}, fp16: {}{}}}\n", num(c.peak_tflops[0]),
                   num(c.peak_tflops[1]), num(c.peak_tflops[2]),
                   c.fp8_peak_tflops > 0 ? ", fp8: " + num(c.fp8_peak_tflops) : "");
  s += fmt::format("  gemm_efficiency: {}\n", num(c.gemm_efficiency));
  if (c.fp8_peak_tflops > 0)
    s += fmt::format("  fp8_gemm_efficiency: {}\n", num(c.fp8_gemm_efficiency));
  s += fmt::format("  gemm_half_dim: {}\n", num(c.gemm_half_dim));
  s += fmt::format("  sm_count: {}\n", c.sm_count);
  s += fmt::format("  gemm_tile: [{}, {}]\n", c.tile_m, c.tile_n);
  s += fmt::format("  memory_bandwidth_GBps: {}\n", num(c.memory_bandwidth_gbps));
  s += fmt::format("  memory_efficiency: {}\n", num(c.memory_efficiency));
  s += fmt::format("  kernel_overhead_us: {}\n", num(c.kernel_overhead_us));
  s += fmt::format("  synthetic_elements_per_s: {}\n", num(c.synthetic_elements_per_s));
  if (c.attention_forward_efficiency > 0)
    s += fmt::format("  attention_efficiency: {{forward: {}, backward: {}}}\n",
                     num(c.attention_forward_efficiency), num(c.attention_backward_efficiency));
  if (!c.attention_kernels.empty()) {
    s += "  attention_kernels:\n";
    for (const auto& [name, rate] : c.attention_kernels)
      s += fmt::format("    {}: {{forward: {}, backward: {}}}\n", name, num(rate.first),
                       num(rate.second));
  }
  s += fmt::format("  memory_bound_efficiency: {}\n", num(c.memory_bound_efficiency));
  s += fmt::format("  launch_us: {}\n", num(c.launch_us));
  if (c.cores > 0) s += fmt::format("  cores: {}\n", c.cores);
  s += "network:\n";
  auto link = [&](const char* level, const LinkSpec& l) {
    s += fmt::format("  {}: {{busbw_GBps: {}", level, num(l.busbw_gbps));
    if (l.collective_sms > 0) s += fmt::format(", collective_sms: {}", l.collective_sms);
    s += "}\n";
  };
  link("intra", m.intra);
  if (m.inter.busbw_gbps > 0) link("inter", m.inter);
  if (m.measured.ranks > 0) {
    s += fmt::format("  measured:\n    ranks: {}\n", m.measured.ranks);
    for (auto k : comm::kAllCollectiveKinds) {
      const auto& mc = m.measured.kinds[static_cast<std::size_t>(k)];
      if (mc)
        s += fmt::format("    {}: {{latency_us: {}, busbw_GBps: {}}}\n",
                         comm::collective_kind_name(k), num(mc->latency_us), num(mc->busbw_gbps));
    }
  }
  return s;
}

double peak_flops(const Machine& machine, kernels::Dtype dtype) {
  const double p = machine.compute.peak_flops(dtype);
  if (!(p > 0))
    throw InputError(fmt::format("machine '{}' has no {} peak (compute.peak_tflops)", machine.name,
                                 kernels::dtype_name(dtype)));
  return p;
}

double fp8_peak_flops(const Machine& machine) {
  if (!(machine.compute.fp8_peak_tflops > 0))
    throw InputError(fmt::format(
        "--compute-dtype fp8 is invalid on machine '{}': it has no fp8 peak "
        "(compute.peak_tflops.fp8; valid: a GPU with fp8 tensor cores, e.g. h100-ndr, h200)",
        machine.name));
  return machine.compute.fp8_peak_tflops * 1e12;
}

}  // namespace dmuon::project
