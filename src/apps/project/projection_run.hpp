#pragma once
// One dmuon_project invocation: the machine, the model, for every world size the same rows as
// dmuon_bench (boundary sweep x owner strategies, then the baselines) planned for that world,
// and each row's step schedule replayed on the machine model (src/dmuon/project/). Also what
// dmuon_project prints and writes of it (projection_output.hpp).

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench/bench_output.hpp"
#include "bench/run_list.hpp"
#include "dmuon/base/trace.hpp"
#include "dmuon/model/topology.hpp"
#include "dmuon/project/machine_model.hpp"
#include "dmuon/project/projection.hpp"
#include "options/run_options.hpp"
#include "project/projection_setup.hpp"

namespace dmuon::apps::project {

namespace dm = dmuon::project;

struct WorldRows {
  int world = 0;
  bench::RunList list;
  std::vector<dm::Projection> projections;  ///< by row (empty for rejected rows)
  /// By row: a dmuon row's cost against the world's fsdp-adamw row, term by term
  /// (cost_vs_adamw.hpp), and its memory terms less AdamW's; empty without both rows.
  std::vector<std::vector<std::pair<std::string, double>>> cost_vs_adamw;
  std::vector<std::vector<std::pair<std::string, std::int64_t>>> memory_vs_adamw;
  /// The fsdp-adamw row the dmuon rows are compared with, or -1.
  int adamw_row() const;
};

/// A row over the machine's device memory (memory_model.hpp): status "oom", never a time.
inline bool oom(const bench::BenchRun& run) {
  return run.status == "oom";
}

// One invocation: the machine, the model, the rows of every world and their projections.
struct Invocation {
  /// Loads the machine and the model the options name.
  explicit Invocation(RunOptions& options);
  /// The machine the options name, this model (a pipeline stage's: pipeline_run.hpp).
  Invocation(RunOptions& options, model::Topology model);

  RunOptions& o;
  dm::Machine machine;
  /// The whole model (its activation work and FLOPs) and the model as one rank holds it (the
  /// plans and layouts: rank_topology, --ep an EP rank's experts).
  model::Topology whole;
  model::Topology topo;
  std::string sweep_source;
  std::string demo_note;  ///< the default sweep's demonstration rows left out
  std::vector<WorldRows> worlds;
  ProjectionSetup setup;
  std::optional<Trace> trace;
  /// The bench's options as a projection ran them: one measured step, no device of its own.
  RunOptions ran;

  bool activations() const { return setup.options.activations.modelled; }
  int failures() const {
    int n = 0;
    for (const auto& w : worlds) n += bench::failures(w.list.runs);
    return n;
  }
  int oom_rows() const {
    int n = 0;
    for (const auto& w : worlds)
      for (const auto& run : w.list.runs) n += oom(run);
    return n;
  }
};

/// Plans every world's rows (validating each world first) and makes the projection's setup
/// (the step work, the activations, the FLOPs); `config_path`: the sweep's config file.
void prepare(Invocation& v, const std::string& config_path);

/// Projects every row that planned; a row over the device memory gets status oom (no time).
void project_each_row(Invocation& v);

/// Plans, projects and prints (or writes) every row of the invocation; the exit code.
int run_projection(RunOptions& o, int argc, char** argv, const std::string& config_path);

}  // namespace dmuon::apps::project
