#pragma once
// dmuon_bench's command line: the shared plan flags plus what the bench adds (boundary sweep,
// methods, engine options, output). Every flag has a config key (config_keys.hpp) and the
// apps test bench_config_keys_match_flags checks that the two lists agree.

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/plan_options.hpp"
#include "common/run_agreement.hpp"
#include "dmuon/engine/step/engine_options.hpp"
#include "dmuon/model/topology.hpp"
#include "dmuon/work/flop_convention.hpp"
#include "dmuon/work/run_shape.hpp"
#include "dmuon/work/step_work.hpp"

namespace dmuon::apps::bench {

/// Defaults sized so `mpirun -n 8 dmuon_bench --topology moe` (full sweep, 3 methods) answers
/// in well under a minute on two oversubscribed cores.
inline constexpr int kDefaultSteps = 4;  // 4 vs 4 samples: the U test can reach p < 0.05
inline constexpr int kDefaultWarmup = 1;
inline constexpr std::int64_t kDefaultTokens = 16;

struct BenchOptions {
  PlanOptions plan;                     ///< plan.boundary/plan.lenient are unused (see below)
  std::vector<std::string> boundaries;  ///< --boundary items ("strict:S"/"lenient:S" allowed)
  bool lenient = false;                 ///< strictness of items without their own
  std::vector<std::string> methods;     ///< empty = dmuon, fsdp-adamw, fsdp-muon
  /// --owner-strategy items (comma lists allowed); empty = lpt. dmuon runs once per
  /// (boundary, strategy); resolve_engine_options() fills owner_strategies_resolved.
  std::vector<std::string> owner_strategies;
  std::vector<std::string> owner_strategies_resolved;
  std::string reshard = "z3";
  std::string grad_reduce = "per-param";
  std::string compute = "gemm";
  std::string device = "host";
  std::string comm_dtype = "fp32";
  std::string reduce_dtype;  ///< --reduce-dtype text ("" when not given: --comm-dtype's)
  bool reduce_dtype_given = false;
  std::string ns = "gram";
  std::string ns_dtype = "fp16";
  std::string optimizer_pipeline = "per-group";
  std::string clip_norm;  ///< --clip-norm text ("" when not given)
  bool clip_norm_given = false;
  std::string clip_norm_type;  ///< --clip-norm-type text ("" when not given)
  std::string accum;           ///< --accum text ("" when not given)
  bool accum_given = false;
  /// The step's activation work (docs/STEP-WORK.md): tokens per sample and samples per rank
  /// (0: the parameters' work only, on --tokens / --global-tokens), checkpointing, compute
  /// dtype ("" = the device's), and the FLOP convention of the reported MFU.
  std::int64_t seq_len = 0;
  std::int64_t micro_batch = 0;
  std::string ac = "none";
  std::string compute_dtype;
  std::string flops = "6n-attn";
  std::string fusion = "fused";
  work::AcPolicy ac_resolved = work::AcPolicy::none;
  work::FlopConvention flops_resolved = work::FlopConvention::six_n_attn;
  work::Fusion fusion_resolved = work::Fusion::fused;
  engine::EngineOptions engine;
  int repeats = 1;  ///< engine runs per row (each with its warm-up): samples = repeats x steps
  bool json = false;
  bool wide = false;   ///< table: full boundary specs and errors instead of fitting 160 columns
  std::string output;  ///< "" = no results file
  std::string trace;   ///< --trace: Chrome trace-event JSON of the run's timeline
  bool trace_given = false;  ///< --trace was given (even as '', which is bad input)
};

/// Registers every dmuon_bench flag on `app`.
void add_bench_options(CLI::App& app, BenchOptions& o);

/// Resolves methods/reshard/compute into o.engine, the owner strategies into
/// o.owner_strategies_resolved (canonical names, duplicates dropped), and returns the method
/// list; InputError on bad values.
std::vector<engine::Method> resolve_engine_options(BenchOptions& o);

/// Adds the resolved options every rank must share to `d` (run_agreement.hpp), after
/// resolve_engine_options() and attach_step_work(); `methods` as resolved. What only rank 0
/// uses is left out: the output and trace paths (whether there is one counts: every rank takes
/// part in writing it), --json, --wide, --flops; the topology and the boundaries are compared
/// as resolved (describe_topology, the rows). tests/apps/run_agreement_keys_check.py holds
/// every config key to a line here or a reason.
void describe_options(const BenchOptions& o, const std::vector<engine::Method>& methods,
                      RunDescription& d);

/// The step's work at the run's shape (--seq-len, --micro-batch, --ac) for `topology`, in the
/// compute type `dtype`: sets o.engine.step.activation and returns the work (nullopt without
/// --seq-len). A topology without a geometry gets its parameters' work only (the work's note).
std::optional<work::StepWork> attach_step_work(BenchOptions& o, const model::Topology& topology,
                                               kernels::Dtype dtype);

/// "# step work: ..." (the run shape and the activation work's totals per rank and micro-batch)
/// and one "# note: ..." line per thing the work model leaves out; for the tools' headers.
std::string step_work_lines(const BenchOptions& o, const work::StepWork& w);

}  // namespace dmuon::apps::bench
