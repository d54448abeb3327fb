#include "project/project_options.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>

#include "common/config_dir.hpp"
#include "dmuon/base/comma_list.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/project/machine_model.hpp"

namespace dmuon::apps::project {
namespace {

// dmuon_bench flags a projection has no use for (it measures nothing and runs no steps).
const char* const kMeasuredOnly[] = {"--device", "--steps",           "--warmup",         "--seed",
                                     "--check",  "--check-tolerance", "--inject-nan-step"};

}  // namespace

void add_project_options(CLI::App& app, ProjectOptions& o) {
  bench::add_bench_options(app, o.bench);
  for (const char* flag : kMeasuredOnly) app.remove_option(app.get_option(flag));
  app.add_option(
      "--machine", o.machine,
      "machine model: a name in configs/machines (a100-80gb, a800, gb200-nvl72, "
      "h100-96gb-500w, h100-ndr, h200) or a YAML file (e.g. one written by --calibrate)");
  app.add_option("--world-size", o.world_sizes,
                 "ranks of the modelled world; a comma list sweeps (8,64,512,4096)");
  app.add_option("--symmetry", o.symmetry,
                 "reduced (rank symmetry, the default) or full (every rank's full layout: slow, "
                 "for checking the reduction)")
      ->capture_default_str();
  app.add_flag("--calibrate", o.calibrate,
               "measure this machine (run under mpirun -n N): GEMM, memory and synthetic-draw "
               "rates per rank and MPI latency/bandwidth per collective; writes --output-machine");
  app.add_option("--output-machine", o.output_machine,
                 "--calibrate: the machine file to write (YAML)");
  app.add_option("--machine-name", o.machine_name,
                 "--calibrate: the name recorded in the machine file (default calibrated-<host>)");
  app.add_option("--trace-ranks", o.trace_ranks,
                 "ranks --trace records: a comma list, or all (at most 256 ranks); default 0");
}

const std::vector<config::ConfigKey>& project_config_keys() {
  static const std::vector<config::ConfigKey> keys = [] {
    std::vector<config::ConfigKey> k;
    for (const auto& key : config::bench_config_keys()) {
      const std::string flag = key.flag();
      if (std::find(std::begin(kMeasuredOnly), std::end(kMeasuredOnly), flag) ==
          std::end(kMeasuredOnly))
        k.push_back(key);
    }
    using config::KeyKind;
    k.push_back({"machine", KeyKind::scalar, "machine model (name or YAML file)"});
    k.push_back({"world_size", KeyKind::list, "modelled world size(s)"});
    k.push_back({"symmetry", KeyKind::scalar, "reduced | full"});
    k.push_back({"trace_ranks", KeyKind::list, "ranks the trace records (all)"});
    return k;
  }();
  return keys;
}

std::vector<engine::Method> resolve_project_options(ProjectOptions& o) {
  const auto methods = bench::resolve_engine_options(o.bench);
  if (o.symmetry == "reduced")
    o.symmetry_resolved = dmuon::project::Symmetry::reduced;
  else if (o.symmetry == "full")
    o.symmetry_resolved = dmuon::project::Symmetry::full;
  else
    throw InputError(fmt::format("--symmetry '{}' is invalid (valid: reduced, full)", o.symmetry));
  o.worlds.clear();
  for (const auto& word : split_comma_lists(o.world_sizes, "--world-size")) {
    int n = 0;
    const auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), n);
    if (ec != std::errc() || end != word.data() + word.size() || n < 1 || n > (1 << 24))
      throw InputError(fmt::format(
          "--world-size '{}' is invalid (valid: ranks 1..16777216, or a comma list of them)",
          word));
    if (std::find(o.worlds.begin(), o.worlds.end(), n) == o.worlds.end()) o.worlds.push_back(n);
  }
  if (!o.calibrate && o.worlds.empty())
    throw InputError("--world-size is required (ranks of the modelled world, e.g. 8,64,512)");
  o.trace_rank_list.clear();
  if (!o.bench.trace.empty()) {
    const auto words = split_comma_lists(o.trace_ranks, "--trace-ranks");
    if (words.empty()) o.trace_rank_list.push_back(0);
    for (const auto& word : words) {
      int r = 0;
      const auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), r);
      if (word == "all")
        r = -1;
      else if (ec != std::errc() || end != word.data() + word.size() || r < 0)
        throw InputError(fmt::format(
            "--trace-ranks '{}' is invalid (valid: ranks 0..world-1 as a comma list, or all)",
            word));
      o.trace_rank_list.push_back(r);
    }
  } else if (!o.trace_ranks.empty()) {
    throw InputError("--trace-ranks needs --trace FILE (where to write the timeline)");
  }
  if (o.calibrate) {
    if (o.output_machine.empty())
      throw InputError("--calibrate needs --output-machine FILE (the machine file to write)");
  } else {
    if (!o.output_machine.empty()) throw InputError("--output-machine needs --calibrate");
    if (o.machine.empty()) {
      const auto names = dmuon::project::machine_names(
          apps::config_dir().empty() ? std::string() : apps::config_dir() + "/machines");
      throw InputError(fmt::format(
          "--machine is required ({}, or a YAML machine file)",
          names.empty() ? "no shipped machine found" : fmt::format("{}", fmt::join(names, ", "))));
    }
  }
  return methods;
}

}  // namespace dmuon::apps::project
