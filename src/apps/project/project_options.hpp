#pragma once
// dmuon_project's command line: dmuon_bench's flags where they apply (the same parser, minus
// what only a measured run has: --device, --steps, --warmup, --seed, --check,
// --check-tolerance, --inject-nan-step), plus the machine model, the world sizes and the
// token shape of the reference's benchmarks, and the calibration mode.

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "bench/bench_options.hpp"
#include "dmuon/config/config_keys.hpp"
#include "dmuon/project/world_programs.hpp"

namespace dmuon::apps::project {

struct ProjectOptions {
  bench::BenchOptions bench;
  std::string machine;                   ///< name in configs/machines or a YAML file
  std::vector<std::string> world_sizes;  ///< comma lists allowed
  std::string symmetry = "reduced";      ///< reduced | full (a test aid: no rank symmetry)
  bool calibrate = false;
  std::string output_machine;            ///< --calibrate: where to write the measured machine file
  std::string machine_name;              ///< --calibrate: its name (default: calibrated-<host>)
  std::vector<std::string> trace_ranks;  ///< --trace-ranks: comma lists, "all"; default rank 0

  std::vector<int> worlds;           ///< resolved
  std::vector<int> trace_rank_list;  ///< resolved (-1: every rank); empty without --trace
  dmuon::project::Symmetry symmetry_resolved = dmuon::project::Symmetry::reduced;
};

/// Registers every dmuon_project flag.
void add_project_options(CLI::App& app, ProjectOptions& o);

/// The config keys dmuon_project accepts (dmuon_bench's that apply, plus its own).
const std::vector<config::ConfigKey>& project_config_keys();

/// Resolves the bench part (methods, engine options), the world sizes, the token shape and
/// the symmetry; returns the methods. InputError on bad values.
std::vector<engine::Method> resolve_project_options(ProjectOptions& o);

}  // namespace dmuon::apps::project
