#pragma once
// Every option of the tools that plan, run, project or advise a DMuon step, as typed values:
// what the option table (run_option_table.hpp) parses the command line and config files into.
// Each field is set by exactly one row of the table; a tool reads the fields it takes and
// leaves the others at their defaults. Which options were given is kept in `given`.

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "dmuon/engine/step/engine_options.hpp"
#include "dmuon/engine/step/method.hpp"
#include "dmuon/partition/partition.hpp"
#include "dmuon/plan/plan.hpp"
#include "dmuon/project/machine_model.hpp"
#include "dmuon/project/symmetry.hpp"
#include "dmuon/work/flop_convention.hpp"
#include "dmuon/work/run_shape.hpp"

namespace dmuon::apps {

/// The model: a built-in topology with its preset and --set overrides, or a topology file.
struct ModelChoice {
  std::string topology = "moe";
  std::string preset;             ///< "" = the topology's default preset
  std::vector<std::string> sets;  ///< KEY=VALUE overrides of preset dimensions
  std::string topology_file;      ///< non-empty: the model comes from this file
};

/// The activation work of a real step (docs/STEP-WORK.md): tokens per sample and samples per
/// rank (0: the parameters' work only), checkpointing, fusion and the MFU convention.
struct WorkloadChoice {
  std::int64_t seq_len = 0;
  std::int64_t micro_batch = 0;
  work::AcPolicy ac = work::AcPolicy::none;
  work::Fusion fusion = work::Fusion::fused;
  work::FlopConvention flops = work::FlopConvention::six_n_attn;
  /// --sequence-parallel (with --tp T > 1 and --seq-len; the projection's: work::TensorParallel)
  bool sequence_parallel = false;
  /// --cp C (with --seq-len; the projection's: work::ContextParallel): every sequence split
  /// over C ranks of a shard group, tokens per rank and step seq-len / C x micro-batch x accum.
  int cp = 1;
  /// --pp P, --pp-chunks v (dmuon_project: pipeline_run.hpp; dmuon_bench: 1F1B stages): P
  /// pipeline stages of the model's blocks, v chunks of them per rank (v > 1: interleaved 1F1B).
  int pp = 1;
  int pp_chunks = 1;
  /// --pp-microbatches n: micro-batches per run of the pipeline schedule; --accum / n runs per
  /// step, each with its own fill and drain. 0: all of --accum in one run.
  int pp_microbatches = 0;
  /// The runs of the pipeline schedule a step of `accum` micro-batches makes.
  int pp_runs(int accum) const { return pp_microbatches > 0 ? accum / pp_microbatches : 1; }
  /// --ep-dispatcher, --routing (with --ep E > 1 and --seq-len; the projection's:
  /// work::ExpertParallel): how the routed tokens reach their experts' ranks.
  work::EpDispatcher ep_dispatcher = work::EpDispatcher::all_to_all;
  work::ExpertRouting routing = work::ExpertRouting::uniform;
  /// --attention-kernel: the machine's attention rates to cost (project::with_attention_kernel)
  std::string attention_kernel = ::dmuon::project::kDefaultAttentionKernel;
  /// Set when dmuon_project chose seq_len itself (the preset's training length): what it says.
  std::string seq_len_note;
};

/// dmuon_project's and dmuon_advise's machine model and worlds.
struct ProjectionChoice {
  std::string machine;           ///< a name in configs/machines or a YAML file
  std::vector<int> world_sizes;  ///< dmuon_inspect: one (default 8)
  project::Symmetry symmetry = project::Symmetry::reduced;
  bool calibrate = false;
  std::string output_machine;    ///< --calibrate: the machine file to write
  std::string machine_name;      ///< --calibrate: its name ("" = calibrated-<host>)
  std::vector<int> trace_ranks;  ///< -1: every rank; empty: rank 0
};

/// dmuon_advise's search.
struct AdviseChoice {
  double memory_cap_gb = 0;  ///< 0: the machine's memory_GB
  int top = 10;
  double time_limit_s = 180;
  int max_passes = 3;
  /// Percent of the fastest step within which the simplest, leanest candidate wins.
  double tolerance_pct = 1;
  std::string write_config;
};

/// Defaults sized so `mpirun -n 8 dmuon_bench --topology moe` (full sweep, 3 methods) answers
/// in well under a minute on two oversubscribed cores.
inline constexpr int kDefaultSteps = 4;  // 4 vs 4 samples: the U test can reach p < 0.05
inline constexpr int kDefaultWarmup = 1;
inline constexpr std::int64_t kDefaultTokens = 16;

struct RunOptions {
  RunOptions() {
    engine.run.steps = kDefaultSteps;
    engine.run.warmup = kDefaultWarmup;
    engine.step.tokens = kDefaultTokens;
  }

  ModelChoice model;
  bool list = false;  ///< --list: print the built-in topologies and exit
  /// The plan's settings. Its world-dependent parts (shard, replicate slots), its boundary and
  /// owner strategy (one per sweep row) and the topology's defaults (an empty dedication rule)
  /// are filled per row by make_plan_config.
  plan::PlanConfig plan;
  std::vector<std::string> boundaries;  ///< --boundary items ("strict:S", "lenient:S", "S")
  bool lenient = false;                 ///< strictness of items without their own
  std::vector<partition::Strategy> owner_strategies = {partition::Strategy::lpt};
  std::vector<engine::Method> methods;  ///< empty: the tool's default
  /// The baselines' FSDP units: "repeated-blocks" (boundary/repeated_blocks.hpp) or a
  /// boundary spec; never the swept boundary.
  std::string baseline_units = "repeated-blocks";
  engine::EngineOptions engine;
  /// --baseline-reshard: the baselines' resharding (unset: engine.step.reshard); reshard_for.
  std::optional<plan::Reshard> baseline_reshard;
  WorkloadChoice workload;
  int repeats = 1;  ///< engine runs per row: samples = repeats x steps
  bool json = false;
  bool wide = false;   ///< tables: long specs in full instead of fitting 160 columns
  std::string output;  ///< results file ("" = none)
  std::string trace;   ///< Chrome trace-event JSON ("" = none)
  ProjectionChoice projection;
  AdviseChoice advise;
  std::string layout;          ///< dmuon_inspect: a named R x G x T layout
  std::int64_t max_rows = 40;  ///< dmuon_inspect: rows per table
  /// Config keys of the options given (on the command line or by --config).
  std::set<std::string> given;

  bool was_given(const std::string& key) const { return given.count(key) != 0; }
};

/// The resharding `method` runs with: the owner-based methods (dmuon, ddp-dmuon) --reshard, the
/// baselines --baseline-reshard when given (the reference benchmarked AdamW under FSDP2's
/// default, reshard after forward, beside DMuon Z2).
inline plan::Reshard reshard_for(const RunOptions& o, engine::Method method) {
  const bool owners = method == engine::Method::dmuon || method == engine::Method::ddp_dmuon;
  return owners ? o.engine.step.reshard : o.baseline_reshard.value_or(o.engine.step.reshard);
}

}  // namespace dmuon::apps
