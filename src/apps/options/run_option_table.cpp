#include "options/run_option_table.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "dmuon/base/error.hpp"
#include "dmuon/boundary/tp_shard.hpp"
#include "dmuon/engine/step/accumulation.hpp"
#include "dmuon/engine/step/grad_clip.hpp"
#include "dmuon/plan/comm_volume.hpp"
#include "dmuon/plan/param_route.hpp"

namespace dmuon::apps::options {
namespace {

using O = RunOptions;
using kernels::Dtype;

// Row builders bound to RunOptions.
template <class K, class Get>
RunOption one(const char* flag, const char* group, const char* help, K kind, Get get) {
  return value<O>(flag, group, help, std::move(kind), get);
}
template <class K, class Get>
RunOption many(const char* flag, const char* group, const char* help, K kind, Get get,
               bool comma_list) {
  return list<O>(flag, group, help, std::move(kind), get, comma_list);
}
template <class Get>
RunOption on_off(const char* flag, const char* group, const char* help, Get get) {
  return options::flag<O>(flag, group, help, get);
}

// The domain's names of its enums.
Choice<Dtype> dtypes(std::initializer_list<Dtype> allowed) {
  return choice(allowed, [](Dtype t) { return engine::dtype_flag_name(t); });
}
Choice<partition::Strategy> strategies() {
  using S = partition::Strategy;
  auto c = choice({S::lpt, S::round_robin, S::rank0, S::lpt_refine}, partition::strategy_name);
  c.aliases = {{S::round_robin, "round-robin"}, {S::lpt_refine, "lpt-refine"}};
  return c;
}
Choice<engine::Method> methods() {
  using M = engine::Method;
  return choice({M::dmuon, M::fsdp_adamw, M::fsdp_muon, M::ddp_muon, M::ddp_dmuon},
                engine::method_name);
}

constexpr const char* kGroupModel = "Model";
constexpr const char* kGroupPlan = "Plan (hook boundaries, owners, routes, layout)";
constexpr const char* kGroupSweep = "What runs (each row of the table)";
constexpr const char* kGroupStep = "The step (communication and optimizer)";
constexpr const char* kGroupWork = "The step's work (activations, batch)";
constexpr const char* kGroupRun = "Measurement";
constexpr const char* kGroupOut = "Output";
constexpr const char* kGroupProjection = "Projection";
constexpr const char* kGroupAdvisor = "Advisor";
constexpr const char* kGroupInspect = "Inspect";

bool builtin_model(const O& o) {
  return o.model.topology_file.empty();
}
bool with_work(const O& o) {
  return o.workload.seq_len > 0;
}
bool clipping(const O& o) {
  return o.engine.step.clip_norm > 0;
}
// No --method list means the tools' default, which runs dmuon.
bool runs_dmuon(const O& o) {
  return o.methods.empty() ||
         std::find(o.methods.begin(), o.methods.end(), engine::Method::dmuon) != o.methods.end();
}

const char* const kFormatOnly = "how results are printed, not what they are";
const char* const kWhereOnly = "where results are written, not what they are";

std::vector<RunOption> model_rows() {
  std::vector<RunOption> r;
  r.push_back(one(
                  "--topology", kGroupModel, "built-in topology (see --list)", Text{},
                  [](auto& o) -> auto& { return o.model.topology; })
                  .in(kAllTools)
                  .field_key("topology")
                  .when(builtin_model)
                  .agreed(Agree::resolved));
  r.push_back(one(
                  "--preset", kGroupModel, "preset of the topology (default: the topology's)",
                  Text{}, [](auto& o) -> auto& { return o.model.preset; })
                  .in(kAllTools)
                  .field_key("preset")
                  .when(builtin_model)
                  .agreed(Agree::resolved));
  r.push_back(many(
                  "--set", kGroupModel, "override a preset dimension, KEY=VALUE", Text{"KEY=VALUE"},
                  [](auto& o) -> auto& { return o.model.sets; }, false)
                  .in(kAllTools)
                  .field_key("sets")
                  .when(builtin_model)
                  .agreed(Agree::resolved));
  r.push_back(one(
                  "--topology-file", kGroupModel, "JSON topology file (instead of --topology)",
                  Text{"a path"}, [](auto& o) -> auto& { return o.model.topology_file; })
                  .in(kAllTools)
                  .field_key("topology")
                  .agreed(Agree::resolved));
  r.push_back(on_off(
                  "--list", kGroupModel,
                  "list built-in topologies, presets and --set keys, then exit",
                  [](auto& o) -> auto& { return o.list; })
                  .in(kAllTools)
                  .not_in_key("prints the topologies and exits; runs nothing")
                  .agreed(Agree::none)
                  .showing(kNoConfig));
  return r;
}

// Which parameters are dedicated and where each is routed.
std::vector<RunOption> plan_rows() {
  std::vector<RunOption> r;
  r.push_back(one(
                  "--dedicate", kGroupPlan,
                  "dedication rule, e.g. 'ndim=2&excludes:router' (default: the topology's)",
                  Text{"a dedication rule"}, [](auto& o) -> auto& { return o.plan.dedicate_rule; })
                  .in(kAllTools)
                  .field_key("dedicate_rule")
                  .showing(kPlanJson));
  r.push_back(many(
                  "--route", kGroupPlan,
                  "parameter route RULE=muon|adamw|fsdp|sharded_adamw (RULE as --dedicate; the "
                  "first matching wins), e.g. 'contains:norm=adamw'; ROUTE:fp32 or ROUTE:bf16 "
                  "sets the matched parameters' wire type, weights and gradients",
                  Text{"RULE=ROUTE[:fp32|bf16]"}, [](auto& o) -> auto& { return o.plan.routes; },
                  false)
                  .in(kAllTools)
                  .plan_key("routes", "")
                  .keyed_as([](const O& o) {
                    return o.plan.routes.empty() ? std::string() : plan::routes_text(o.plan.routes);
                  })
                  .showing(kPlanJson));
  return r;
}

// How the partition forms its units and spreads them over owners.
std::vector<RunOption> partition_rows() {
  std::vector<RunOption> r;
  r.push_back(one(
                  "--cost-model", kGroupPlan,
                  "the partition's cost of a parameter: optimizer | numel",
                  choice({partition::CostModel::optimizer, partition::CostModel::numel},
                         partition::cost_model_name),
                  [](auto& o) -> auto& { return o.plan.partition.cost_model; })
                  .in(kAllTools)
                  .field_key("cost_model")
                  .showing(kPlanJson | kKnob));
  r.push_back(one(
                  "--pack-threshold", kGroupPlan,
                  "numel below which a bucket's parameters are packed into one unit (0: no "
                  "packing, every parameter its own unit)",
                  Integer<std::int64_t>{0, std::int64_t{1} << 50},
                  [](auto& o) -> auto& { return o.plan.partition.pack_threshold; })
                  .in(kAllTools)
                  .plan_key("pack")
                  .keyed_as([](const O& o) {
                    const auto t = o.plan.partition.pack_threshold;
                    return t == 0 ? std::string("off") : fmt::format("<{}", t);
                  })
                  .showing(kPlanJson | kKnob));
  r.push_back(flag_fn<O>(
                  "--no-pack", kGroupPlan,
                  "every parameter its own partition unit "
                  "(= --pack-threshold 0)",
                  [](O& o) { o.plan.partition.pack_threshold = 0; },
                  [](const O& o) { return o.plan.partition.pack_threshold == 0; })
                  .in(kAllTools)
                  .not_in_key("the same setting as --pack-threshold 0: keyed as its pack fragment")
                  .excluding("pack_threshold", "both set packing")
                  .showing(kNoConfig));
  r.push_back(one(
                  "--max-owners-per-group", kGroupPlan,
                  "limit the owners of one group key (0 = unlimited)",
                  Integer<int>{0, static_cast<int>(partition::kMaxSlots)},
                  [](auto& o) -> auto& { return o.plan.partition.max_owners_per_group; })
                  .in(kAllTools)
                  .plan_key("max_owners_per_group")
                  .showing(kPlanJson));
  r.push_back(flag_fn<O>(
                  "--no-column-balance", kGroupPlan, "HSDP: do not balance per-column loads",
                  [](O& o) { o.plan.partition.column_balance = false; },
                  [](const O& o) { return !o.plan.partition.column_balance; })
                  .in(kAllTools)
                  .plan_key("column_balance")
                  .keyed_as([](const O& o) {
                    return std::string(o.plan.partition.column_balance ? "on" : "off");
                  })
                  .showing(kPlanJson));
  r.push_back(one(
                  "--group-key", kGroupPlan,
                  "what buckets the partition's units (packing, same-key spreading, "
                  "--max-owners-per-group): layer (layers.N/blocks.N of the name, the "
                  "reference's) | site (the hook site: follows --boundary)",
                  choice({partition::GroupKey::layer, partition::GroupKey::site},
                         partition::group_key_name),
                  [](auto& o) -> auto& { return o.plan.partition.group_key; })
                  .in(kAllTools)
                  .plan_key("group_key", "layer")
                  .showing(kPlanJson));
  return r;
}

// The rank grid: HSDP replication and tensor parallelism.
std::vector<RunOption> layout_rows() {
  std::vector<RunOption> r;
  r.push_back(one(
                  "--replicate", kGroupPlan, "replicate-group size R (HSDP when > 1)",
                  Integer<int>{1, static_cast<int>(partition::kMaxSlots)},
                  [](auto& o) -> auto& { return o.plan.partition.replicate; })
                  .in(kAllTools)
                  .field_key("replicate")
                  .showing(kPlanJson | kKnob));
  r.push_back(one(
                  "--tp", kGroupPlan,
                  "tensor-parallel group size T (world = R x G x T, TP fastest: rank = "
                  "(replicate*G + shard)*T + tp)",
                  Integer<int>{1, boundary::kMaxTp}, [](auto& o) -> auto& { return o.plan.tp; })
                  .in(kAllTools)
                  .field_key("tp")
                  .showing(kPlanJson));
  r.push_back(one(
                  "--ep", kGroupPlan,
                  "expert-parallel group size E: each rank of a shard group holds its 1/E of "
                  "every layer's routed experts, its tokens dispatched to them by all-to-all "
                  "(docs/STEP-WORK.md); E a divisor of G (the shard group), without --replicate "
                  "or --tp: E = G each rank's own, whole; E < G shared by an expert group of G/E "
                  "ranks; run (without --seq-len), planned, projected, and searched by "
                  "dmuon_advise (1, the largest E inside one NVLink domain and the largest, each "
                  "dividing the "
                  "world and the experts)",
                  Integer<int>{1, work::kMaxEp}, [](auto& o) -> auto& { return o.plan.ep; })
                  .in(kAllTools)
                  .plan_key("ep", "1")
                  .showing(kPlanJson | kKnob));
  r.push_back(one(
                  "--tp-shard", kGroupPlan,
                  "rule (as --dedicate) picking the TP-sharded dedicated parameters (default: "
                  "the built-in rule, docs/METRICS.md)",
                  Text{"a dedication rule"}, [](auto& o) -> auto& { return o.plan.tp_shard_rule; })
                  .in(kAllTools)
                  .plan_key("tp_shard", "")
                  .showing(kPlanJson));
  r.push_back(one(
                  "--tp-row", kGroupPlan,
                  "rule picking the row-parallel (dim 1) ones among them; the rest shard dim 0",
                  Text{"a dedication rule"}, [](auto& o) -> auto& { return o.plan.tp_row_rule; })
                  .in(kAllTools)
                  .plan_key("tp_row", "")
                  .showing(kPlanJson));
  return r;
}

std::vector<RunOption> sweep_rows() {
  std::vector<RunOption> r;
  r.push_back(many(
                  "--boundary", kGroupSweep,
                  "hook boundary: default | recommended | incomplete | types:T1,T2 | "
                  "paths:REGEX | resolver:PARAM_REGEX=PATH;... (regexes are RE2; prefix "
                  "strict: or lenient: to fix one item's mode). dmuon_bench: repeatable, a "
                  "sweep; without it the topology's sweep (configs/sweeps/<topology>.yaml)",
                  Text{"a boundary spec"}, [](auto& o) -> auto& { return o.boundaries; }, false)
                  .in(kAllTools)
                  .field_key("boundary")
                  .agreed(Agree::resolved)
                  .showing(kPlanJson | kKnob));
  r.push_back(on_off(
                  "--lenient", kGroupSweep,
                  "lenient mode for --boundary items without a strict:/lenient: prefix "
                  "(unmatched parameters fall back to their parent)",
                  [](auto& o) -> auto& { return o.lenient; })
                  .in(kInspect | kBench | kProject)
                  .field_key("boundary")
                  .agreed(Agree::resolved)
                  .showing(kPlanJson));
  r.push_back(many(
                  "--owner-strategy", kGroupSweep,
                  "lpt | round_robin | rank0 | lpt_refine (dmuon_bench and dmuon_project: a "
                  "list runs dmuon once per boundary and strategy)",
                  strategies(), [](auto& o) -> auto& { return o.owner_strategies; }, true)
                  .in(kAllTools)
                  .field_key("strategy")
                  .showing(kPlanJson | kKnob));
  r.push_back(many(
                  "--method", kGroupSweep,
                  "dmuon|fsdp-adamw|fsdp-muon|ddp-muon|ddp-dmuon (default dmuon,fsdp-adamw,"
                  "fsdp-muon; with --tp > 1 dmuon,fsdp-adamw, the others have no TP step); "
                  "baselines run "
                  "once, dmuon and ddp-dmuon once per boundary",
                  methods(), [](auto& o) -> auto& { return o.methods; }, true)
                  .in(kRunTools)
                  .field_key("method"));
  r.push_back(one(
                  "--baseline-units", kGroupSweep,
                  "the FSDP units of the baselines (fsdp-adamw, fsdp-muon, ddp-muon), the same "
                  "whichever --boundary is swept: repeated-blocks (one unit per repeated block "
                  "plus the root, as torchtitan wraps a model) or a boundary spec",
                  Text{"repeated-blocks or a boundary spec"},
                  [](auto& o) -> auto& { return o.baseline_units; })
                  .in(kRunTools)
                  .run_key("baseline_units", "repeated-blocks")
                  // A row's key: only a baseline row runs the units (dmuon rows keep matching).
                  .keyed_as([](const O& o) {
                    const bool baseline =
                        o.methods.empty() ||
                        std::any_of(o.methods.begin(), o.methods.end(), [](engine::Method m) {
                          return m != engine::Method::dmuon && m != engine::Method::ddp_dmuon;
                        });
                    return baseline ? o.baseline_units : std::string("repeated-blocks");
                  }));
  return r;
}

// The communication side of the step: resharding, reduces, prefetch, wire types.
std::vector<RunOption> step_rows() {
  using plan::Reshard;
  std::vector<RunOption> r;
  r.push_back(one(
                  "--reshard", kGroupStep,
                  "z3 (re-broadcast before backward) or z2 (weights kept from forward to "
                  "backward); dmuon_inspect: the mode whose hook sites it shows",
                  choice({Reshard::z3, Reshard::z2}, plan::reshard_name),
                  [](auto& o) -> auto& { return o.engine.step.reshard; })
                  .in(kAllTools)
                  .field_key("reshard")
                  .showing(kPlanJson | kKnob));
  r.push_back(one(
                  "--baseline-reshard", kGroupStep,
                  "the baselines' (fsdp-adamw, fsdp-muon, ddp-muon) resharding, z3 or z2; "
                  "default: --reshard. The reference benchmarked AdamW under FSDP2's default "
                  "(z3: reshard after forward) beside DMuon z2",
                  Optional<Choice<Reshard>>{choice({Reshard::z3, Reshard::z2}, plan::reshard_name)},
                  [](auto& o) -> auto& { return o.baseline_reshard; })
                  .in(kRunTools)
                  .field_key("reshard"));
  r.push_back(
      one(
          "--grad-reduce", kGroupStep,
          "dmuon gradients to owners: per-param (one reduce per parameter, the "
          "reference) or packed (one per site and owner: same bytes, fewer messages)",
          choice({plan::GradReduce::per_param, plan::GradReduce::packed}, plan::grad_reduce_name),
          [](auto& o) -> auto& { return o.engine.step.grad_reduce; })
          .in(kAllTools)
          .field_key("grad_reduce")
          .showing(kPlanJson));
  r.push_back(one(
                  "--prefetch", kGroupStep,
                  "weight broadcasts/all-gathers kept in flight ahead of compute, in groups (0 = "
                  "none; 1 is the reference's)",
                  Integer<int>{0, 64}, [](auto& o) -> auto& { return o.engine.step.prefetch; })
                  .in(kRunTools)
                  .field_key("prefetch")
                  .showing(kKnob));
  r.push_back(one(
                  "--device", kGroupStep,
                  "host (Open MPI + Kokkos) or cuda (NCCL + cuBLAS, one GPU per rank)",
                  choice({engine::Device::host, engine::Device::cuda}, engine::device_name),
                  [](auto& o) -> auto& { return o.engine.backend.device; })
                  .in(kBench)
                  .field_key("device"));
  r.push_back(one(
                  "--comm-dtype", kGroupStep,
                  "fp32 or bf16: parameters and gradients on the wire (and the weights compute "
                  "reads); masters and optimizer state stay fp32",
                  dtypes({Dtype::f32, Dtype::bf16}),
                  [](auto& o) -> auto& { return o.engine.step.wire; })
                  .in(kRunTools)
                  .field_key("comm_dtype")
                  .showing(kKnob));
  r.push_back(one(
                  "--reduce-dtype", kGroupStep,
                  "fp32 or bf16: gradients on the wire (every reduce, reduce-scatter, "
                  "all-reduce and HSDP stage 2, and the gradient buffers); default: "
                  "--comm-dtype. torchtitan's FSDP2 default is --comm-dtype bf16 --reduce-dtype "
                  "fp32",
                  Optional<Choice<Dtype>>{dtypes({Dtype::f32, Dtype::bf16})},
                  [](auto& o) -> auto& { return o.engine.step.reduce; })
                  .in(kRunTools)
                  .field_key("reduce_dtype"));
  r.push_back(one(
                  "--param-dtype", kGroupStep,
                  "fp32 or bf16: the type the parameters are kept in (each rank's master shard, "
                  "the optimizer state torch keeps in it, autograd's gradients), as NeMo "
                  "AutoModel trains its MoE models (cast to bf16); projected only, the engine "
                  "keeps fp32",
                  dtypes({Dtype::f32, Dtype::bf16}),
                  [](auto& o) -> auto& { return o.engine.step.param; })
                  .in(kProject | kAdvise)
                  .run_key("param_dtype", "fp32"));
  return r;
}

// The optimizer's side of the step: Newton-Schulz, its pipeline, clipping, accumulation.
std::vector<RunOption> optimizer_rows() {
  std::vector<RunOption> r;
  r.push_back(one(
                  "--ns", kGroupStep,
                  "Newton-Schulz form: gram (Gram iteration with restart, the reference's) or "
                  "direct",
                  choice({kernels::NsVariant::gram, kernels::NsVariant::direct},
                         [](kernels::NsVariant v) { return std::string(kernels::to_string(v)); }),
                  [](auto& o) -> auto& { return o.engine.backend.ns; })
                  .in(kRunTools)
                  .field_key("ns"));
  r.push_back(
      one(
          "--ns-dtype", kGroupStep,
          "--device cuda: the type Newton-Schulz reads and writes, fp16 (the "
          "reference's), bf16 or fp32 (fp32 norm always; docs/KERNELS.md); the host "
          "computes in fp32",
          dtypes({Dtype::f16, Dtype::bf16, Dtype::f32}),
          [](auto& o) -> auto& { return o.engine.backend.ns_dtype; })
          .in(kBench)
          .field_key("ns")
          .when([](const O& o) { return o.engine.backend.device == engine::Device::cuda; }));
  r.push_back(one(
                  "--optimizer-pipeline", kGroupStep,
                  "per-group (wait, prepare, NS, apply and publish group by group in forward "
                  "order, the reference's) or all-then-publish (every NS, then every update, then "
                  "every HSDP replicate broadcast)",
                  choice({engine::OptimizerPipeline::per_group,
                          engine::OptimizerPipeline::all_then_publish},
                         engine::optimizer_pipeline_name),
                  [](auto& o) -> auto& { return o.engine.step.pipeline; })
                  .in(kRunTools)
                  .field_key("optimizer_pipeline"));
  r.push_back(one(
                  "--dmuon-schedule", kGroupStep,
                  "dmuon's step: reference (the reference's default: one site's reduce in "
                  "flight, the owners' Newton-Schulz after the whole reduce tail, no barrier "
                  "between steps, a communicator's collectives in issue order) or overlapped "
                  "(the earlier idealised step: what a better DMuon would save)",
                  choice({engine::DmuonSchedule::reference, engine::DmuonSchedule::overlapped},
                         engine::dmuon_schedule_name),
                  [](auto& o) -> auto& { return o.engine.step.dmuon_schedule; })
                  .in(kRunTools)
                  .run_key("dmuon_schedule", "overlapped")
                  // Only dmuon's step has it: other methods' records key as files made before.
                  .keyed_as([](const O& o) {
                    return runs_dmuon(o) ? engine::dmuon_schedule_name(o.engine.step.dmuon_schedule)
                                         : "overlapped";
                  })
                  .when(runs_dmuon));
  r.push_back(one(
                  "--momentum-dtype", kGroupStep,
                  "the memory of dmuon's Muon momentum under the reference schedule: grad (the "
                  "gradient's type, as the reference keeps it) or fp32 (the overlapped schedule "
                  "and the engine's executors: fp32)",
                  choice({engine::MomentumDtype::grad, engine::MomentumDtype::fp32},
                         engine::momentum_dtype_name),
                  [](auto& o) -> auto& { return o.engine.step.momentum; })
                  .in(kProject | kAdvise)
                  .run_key("momentum_dtype", "fp32")
                  // What the memory model holds: fp32 wherever the reference schedule is not run.
                  .keyed_as([](const O& o) {
                    return runs_dmuon(o) &&
                                   o.engine.step.dmuon_schedule == engine::DmuonSchedule::reference
                               ? engine::momentum_dtype_name(o.engine.step.momentum)
                               : "fp32";
                  })
                  .when(runs_dmuon));
  r.push_back(one(
                  "--compute", kGroupStep, "gemm (synthetic per-Linear GEMMs) or none",
                  choice({engine::Compute::gemm, engine::Compute::none}, engine::compute_name),
                  [](auto& o) -> auto& { return o.engine.step.compute; })
                  .in(kRunTools)
                  .field_key("compute"));
  return r;
}

// Clipping and accumulation.
std::vector<RunOption> clip_accum_rows() {
  std::vector<RunOption> r;
  r.push_back(one(
                  "--clip-norm", kGroupStep,
                  "clip the global gradient norm to this value before the optimizer, as "
                  "torch.nn.utils.clip_grad_norm_: one world all-reduce of one fp32 per step "
                  "(default: off)",
                  Real{0, 1e30, true}, [](auto& o) -> auto& { return o.engine.step.clip_norm; })
                  .in(kAllTools)
                  .field_key("clip_norm")
                  .showing(kPlanJson)
                  .when(clipping));
  r.push_back(one(
                  "--clip-norm-type", kGroupStep, "the norm --clip-norm bounds: 2 or inf",
                  choice({engine::ClipNormType::two, engine::ClipNormType::inf},
                         engine::clip_norm_type_name),
                  [](auto& o) -> auto& { return o.engine.step.clip_norm_type; })
                  .in(kAllTools)
                  .field_key("clip_norm")
                  .showing(kPlanJson)
                  .needing("clip_norm", "the threshold")
                  .when(clipping));
  r.push_back(one(
                  "--accum", kGroupStep,
                  "gradient accumulation: split each step's global batch into this many "
                  "micro-batches (forward + backward each, weights re-gathered each time; "
                  "gradients reduced after the last one only); with --seq-len each micro-batch "
                  "is --micro-batch samples per rank",
                  Integer<int>{1, engine::kMaxAccum},
                  [](auto& o) -> auto& { return o.engine.step.accum; })
                  .in(kAllTools)
                  .field_key("accum")
                  .showing(kPlanJson));
  return r;
}

// --compute-dtype: fp8 is the projection's only (work/float8.hpp).
RunOption compute_dtype_row() {
  return one(
             "--compute-dtype", kGroupWork,
             "the type activations and GEMMs compute in (default: the device's; a "
             "projected GPU bf16, the host fp32, the CUDA backend the wire type); fp8: "
             "projection only, torchtitan's float8 Linears (tensorwise), the rest bf16",
             Optional<Choice<engine::ComputeDtype>>{
                 choice({engine::ComputeDtype::bf16, engine::ComputeDtype::f16,
                         engine::ComputeDtype::f32, engine::ComputeDtype::fp8},
                        engine::compute_dtype_name)},
             [](auto& o) -> auto& { return o.engine.step.compute_dtype; })
      .in(kRunTools)
      .run_key("compute_dtype", "");
}

// --sequence-parallel: the projection's (work::TensorParallel); dmuon_bench refuses it.
RunOption sequence_parallel_row() {
  return on_off(
             "--sequence-parallel", kGroupWork,
             "with --tp T and --seq-len: sequence parallelism (norms, residuals and embedding "
             "on 1/T of the tokens, an all-gather into and a reduce-scatter out of each TP "
             "region); projection only",
             [](auto& o) -> auto& { return o.workload.sequence_parallel; })
      .in(kAllTools)
      .run_key("sequence_parallel", "false");
}

// --cp: the projection's (work::ContextParallel); the other tools refuse C > 1.
RunOption context_parallel_row() {
  return one(
             "--cp", kGroupPlan,
             "context-parallel group size C, with --seq-len: every sequence split over C ranks of "
             "a shard group, its attention a ring (torch's context_parallel); projected and "
             "searched, not run",
             Integer<int>{1, work::kMaxCp}, [](auto& o) -> auto& { return o.workload.cp; })
      .in(kAllTools)
      .run_key("cp", "1")
      .showing(kKnob);
}

// --ep-dispatcher, --routing: how the EP all-to-alls move the routed tokens (work/
// ep_routing.hpp): projected, and run by dmuon_bench as their bytes.
std::vector<RunOption> expert_dispatch_rows() {
  std::vector<RunOption> r;
  r.push_back(one(
                  "--ep-dispatcher", kGroupWork,
                  "with --ep E > 1 and --seq-len: all-to-all (torchtitan's: every routed copy a "
                  "row of NCCL all-to-alls) or deepep (DeepEP's kernels as Megatron and NeMo "
                  "AutoModel call them: a token sent once to each rank holding one of its "
                  "experts, summed there on return); dmuon_bench runs its all-to-alls' bytes",
                  choice({work::EpDispatcher::all_to_all, work::EpDispatcher::deepep},
                         work::ep_dispatcher_name),
                  [](auto& o) -> auto& { return o.workload.ep_dispatcher; })
                  .in(kBench | kProject | kAdvise)
                  .run_key("ep_dispatcher", "all-to-all"));
  r.push_back(one(
                  "--routing", kGroupWork,
                  "how a token's top-k experts spread, for --ep-dispatcher deepep's bytes: "
                  "uniform (a random k-subset) or consecutive (experts t*k .. t*k+k-1 mod n: "
                  "NeMo AutoModel's FakeBalancedGate, its public benchmark rows); both balanced",
                  choice({work::ExpertRouting::uniform, work::ExpertRouting::consecutive},
                         work::expert_routing_name),
                  [](auto& o) -> auto& { return o.workload.routing; })
                  .in(kBench | kProject | kAdvise)
                  .run_key("routing", "uniform"));
  return r;
}

// --pp, --pp-chunks, --pp-microbatches: dmuon_project's (pipeline_run.hpp) and dmuon_bench's
// (the engine's 1F1B stages); the other tools refuse P > 1.
std::vector<RunOption> pipeline_rows() {
  std::vector<RunOption> r;
  r.push_back(one(
                  "--pp", kGroupPlan,
                  "pipeline-parallel stages P, with --seq-len: the model's blocks cut into P "
                  "stages (the embedding on the first, the head on the last), each stage its own "
                  "world of world/P ranks, --accum micro-batches through them by 1F1B; "
                  "dmuon_project projects it, dmuon_bench runs it on the host (1F1B, data and "
                  "expert parallelism inside each stage)",
                  Integer<int>{1, 64}, [](auto& o) -> auto& { return o.workload.pp; })
                  .in(kAllTools)
                  .run_key("pp", "1"));
  r.push_back(one(
                  "--pp-chunks", kGroupPlan,
                  "with --pp P: chunks of blocks per rank v (v > 1: interleaved 1F1B, rank p "
                  "holding chunks p, p + P, ...; the bubble 1/v of 1F1B's)",
                  Integer<int>{1, 32}, [](auto& o) -> auto& { return o.workload.pp_chunks; })
                  .in(kAllTools)
                  .run_key("pp_chunks", "1"));
  r.push_back(one(
                  "--pp-microbatches", kGroupPlan,
                  "with --pp P: micro-batches per run of the pipeline schedule (torch "
                  "pipelining's n_microbatches), a divisor of --accum; --accum / n runs per step "
                  "accumulate gradients, each with its own fill and drain (NeMo AutoModel's "
                  "gradient accumulation under PP); 0: all of --accum in one run",
                  Integer<int>{0, 100000},
                  [](auto& o) -> auto& { return o.workload.pp_microbatches; })
                  .in(kAllTools)
                  .run_key("pp_microbatches", "0"));
  return r;
}

std::vector<RunOption> work_rows() {
  std::vector<RunOption> r;
  r.push_back(one(
                  "--seq-len", kGroupWork,
                  "tokens per sample: with --micro-batch, tokens per rank and step = seq-len "
                  "x micro-batch x --accum (instead of --tokens), and each micro-step runs the "
                  "model's activation work (docs/STEP-WORK.md)",
                  Integer<std::int64_t>{1, std::int64_t{1} << 24},
                  [](auto& o) -> auto& { return o.workload.seq_len; })
                  .in(kRunTools)
                  .run_key("seq_len", "0")
                  .when(with_work));
  r.push_back(one(
                  "--micro-batch", kGroupWork,
                  "samples per rank and micro-step (with --seq-len; a step runs --accum of them)",
                  Integer<std::int64_t>{1, std::int64_t{1} << 16},
                  [](auto& o) -> auto& { return o.workload.micro_batch; })
                  .in(kRunTools)
                  .run_key("micro_batch", "0")
                  .when(with_work)
                  .showing(kKnob));
  r.push_back(
      one(
          "--ac", kGroupWork,
          "activation checkpointing: none, selective (torchtitan's op policy), "
          "selective-layer, full (recompute each block's forward) or core-attn",
          choice({work::AcPolicy::none, work::AcPolicy::selective, work::AcPolicy::selective_layer,
                  work::AcPolicy::full, work::AcPolicy::core_attn},
                 work::ac_policy_name),
          [](auto& o) -> auto& { return o.workload.ac; })
          .in(kRunTools)
          .run_key("ac", "none")
          .showing(kKnob));
  r.push_back(compute_dtype_row());
  r.push_back(sequence_parallel_row());
  r.push_back(context_parallel_row());
  for (auto& row : pipeline_rows()) r.push_back(std::move(row));
  for (auto& row : expert_dispatch_rows()) r.push_back(std::move(row));
  r.push_back(one(
                  "--fusion", kGroupWork,
                  "how the activation work's elementwise ops run: fused (torch.compile) or "
                  "eager (one kernel per op, docs/STEP-WORK.md)",
                  choice({work::Fusion::fused, work::Fusion::eager}, work::fusion_name),
                  [](auto& o) -> auto& { return o.workload.fusion; })
                  .in(kRunTools)
                  .run_key("fusion", "fused"));
  r.push_back(one(
                  "--flops", kGroupWork,
                  "FLOP convention of the reported model TFLOP/s and MFU: 6n, 6n-attn "
                  "(torchtitan's), megatron, megatron-causal",
                  choice({work::FlopConvention::six_n, work::FlopConvention::six_n_attn,
                          work::FlopConvention::megatron, work::FlopConvention::megatron_causal},
                         work::flop_convention_name),
                  [](auto& o) -> auto& { return o.workload.flops; })
                  .in(kRunTools)
                  .run_key("flops", "6n-attn")
                  .agreed(Agree::none));
  r.push_back(one(
                  "--tokens", kGroupWork, "samples per rank (global batch = tokens x G)",
                  Integer<std::int64_t>{1, std::int64_t{1} << 24},
                  [](auto& o) -> auto& { return o.engine.step.tokens; })
                  .in(kRunTools)
                  .field_key("global_samples")
                  .when([](const O& o) {
                    return o.workload.seq_len == 0 && o.engine.step.global_tokens == 0;
                  }));
  r.push_back(one(
                  "--global-tokens", kGroupWork,
                  "global batch in samples, split over the shard groups (instead of --tokens; "
                  "keeps --check comparable across rank counts)",
                  Integer<std::int64_t>{1, std::int64_t{1} << 28},
                  [](auto& o) -> auto& { return o.engine.step.global_tokens; })
                  .in(kRunTools)
                  .field_key("global_samples")
                  .when([](const O& o) { return o.engine.step.global_tokens > 0; }));
  return r;
}

std::vector<RunOption> run_rows() {
  std::vector<RunOption> r;
  r.push_back(one(
                  "--steps", kGroupRun, "measured steps (per repeat)", Integer<int>{1, 100000},
                  [](auto& o) -> auto& { return o.engine.run.steps; })
                  .in(kBench)
                  .field_key("steps"));
  r.push_back(one(
                  "--warmup", kGroupRun, "unmeasured steps first (in every repeat)",
                  Integer<int>{0, 100000}, [](auto& o) -> auto& { return o.engine.run.warmup; })
                  .in(kBench)
                  .field_key("warmup"));
  r.push_back(one(
                  "--repeats", kGroupRun,
                  "run every row this many times (each after its warm-up); every measured step "
                  "of every repeat is one sample, for spreads and dmuon_compare's test",
                  Integer<int>{1, 1000}, [](auto& o) -> auto& { return o.repeats; })
                  .in(kBench)
                  .not_in_key("more samples of the same run (dmuon_compare pools them)"));
  r.push_back(one(
                  "--seed", kGroupRun, "seed of the synthetic weights and data",
                  Integer<std::uint64_t>{}, [](auto& o) -> auto& { return o.engine.run.seed; })
                  .in(kBench)
                  .field_key("seed"));
  r.push_back(on_off(
                  "--check", kGroupRun,
                  "compare final weights with a one-process recomputation on rank 0",
                  [](auto& o) -> auto& { return o.engine.run.check; })
                  .in(kBench)
                  .not_in_key("its verdict is compared as a deterministic quantity"));
  r.push_back(one(
                  "--check-tolerance", kGroupRun,
                  "max relative error for --check (default 0: 1e-4 when everything is fp32, 8 "
                  "unit roundoffs of the coarsest 16-bit type on the wire or in the device's "
                  "Newton-Schulz)",
                  Real{0, 1, false}, [](auto& o) -> auto& { return o.engine.run.check_tolerance; })
                  .in(kBench)
                  .not_in_key("its verdict is compared as a deterministic quantity"));
  r.push_back(one(
                  "--inject-nan-step", kGroupRun,
                  "test aid: poison one gradient on the last rank at this step (1-based); every "
                  "rank ends after that step with exit 3 naming the parameter",
                  Integer<int>{1, 200000},
                  [](auto& o) -> auto& { return o.engine.run.inject_nan_step; })
                  .in(kBench)
                  .not_in_key("a test aid: the run ends with exit 3 before any file is written")
                  .showing(kNoConfig)
                  .when([](const O& o) { return o.engine.run.inject_nan_step > 0; }));
  return r;
}

std::vector<RunOption> output_rows() {
  std::vector<RunOption> r;
  r.push_back(on_off(
                  "--json", kGroupOut, "print one JSON object instead of the table",
                  [](auto& o) -> auto& { return o.json; })
                  .in(kAllTools)
                  .not_in_key(kFormatOnly)
                  .agreed(Agree::none)
                  .showing(kNoConfig));
  r.push_back(on_off(
                  "--wide", kGroupOut,
                  "tables: long boundary specs and errors in full instead of fitting 160 "
                  "columns",
                  [](auto& o) -> auto& { return o.wide; })
                  .in(kBench | kProject)
                  .not_in_key(kFormatOnly)
                  .agreed(Agree::none)
                  .showing(kNoConfig));
  r.push_back(one(
                  "--output", kGroupOut,
                  "results file (HDF5, written atomically by rank 0; default: none)",
                  Text{"a path"}, [](auto& o) -> auto& { return o.output; })
                  .in(kBench | kProject)
                  .not_in_key(kWhereOnly)
                  .agreed(Agree::presence)
                  .showing(kNoConfig));
  r.push_back(one(
                  "--trace", kGroupOut,
                  "write the run's timeline as Chrome trace-event JSON (Perfetto): per rank the "
                  "phases, compute ops and waits, each stream's collectives with their bytes; "
                  "one run only (one boundary, method, owner strategy)",
                  Text{"a path"}, [](auto& o) -> auto& { return o.trace; })
                  .in(kBench | kProject)
                  .not_in_key(kWhereOnly)
                  .agreed(Agree::presence)
                  .showing(kNoConfig));
  return r;
}

std::vector<RunOption> projection_rows() {
  std::vector<RunOption> r;
  r.push_back(one(
                  "--machine", kGroupProjection,
                  "machine model: a name in configs/machines (a100-80gb, a800, gb200-nvl72, "
                  "h100-96gb-500w, h100-ndr, h200) or a YAML file (e.g. one --calibrate wrote)",
                  Text{"a machine name or file"},
                  [](auto& o) -> auto& { return o.projection.machine; })
                  .in(kProject | kAdvise | kInspect)
                  .run_key("machine", ""));
  r.push_back(one(
                  "--attention-kernel", kGroupProjection,
                  "the fused attention kernel the projection costs: default (the machine's "
                  "attention_efficiency: FlashAttention-2 for the H100 and A100 files) or one "
                  "the machine file lists under attention_kernels (h100-ndr: cudnn, the kernel "
                  "Transformer Engine runs)",
                  Text{"a kernel name"},
                  [](auto& o) -> auto& { return o.workload.attention_kernel; })
                  .in(kProject | kAdvise)
                  .run_key("attention_kernel", ::dmuon::project::kDefaultAttentionKernel));
  r.push_back(many(
                  "--world-size", kGroupProjection,
                  "ranks of the modelled world (dmuon_project: a comma list sweeps, e.g. "
                  "8,64,512,4096; dmuon_inspect: default 8)",
                  Integer<int>{1, 1 << 24},
                  [](auto& o) -> auto& { return o.projection.world_sizes; }, true)
                  .in(kInspect | kProject | kAdvise)
                  .named("-n")
                  .field_key("world_size")
                  .showing(kPlanJson));
  r.push_back(
      one(
          "--symmetry", kGroupProjection,
          "reduced (rank symmetry, the default) or full (every rank's full layout: "
          "slow, for checking the reduction)",
          choice({project::Symmetry::reduced, project::Symmetry::full}, project::symmetry_name),
          [](auto& o) -> auto& { return o.projection.symmetry; })
          .in(kProject)
          .not_in_key("a test aid: both give the same projection")
          .showing(kNoConfig));
  r.push_back(on_off(
                  "--calibrate", kGroupProjection,
                  "measure this machine (under mpirun -n N): GEMM, memory and synthetic-draw "
                  "rates per rank and MPI latency/bandwidth per collective; writes "
                  "--output-machine",
                  [](auto& o) -> auto& { return o.projection.calibrate; })
                  .in(kProject)
                  .not_in_key("writes a machine file, no run")
                  .showing(kNoConfig));
  r.push_back(one(
                  "--output-machine", kGroupProjection,
                  "--calibrate: the machine file to write (YAML)", Text{"a path"},
                  [](auto& o) -> auto& { return o.projection.output_machine; })
                  .in(kProject)
                  .not_in_key("writes a machine file, no run")
                  .showing(kNoConfig));
  r.push_back(one(
                  "--machine-name", kGroupProjection,
                  "--calibrate: the name recorded in the machine file (default "
                  "calibrated-<host>)",
                  Text{"a name"}, [](auto& o) -> auto& { return o.projection.machine_name; })
                  .in(kProject)
                  .not_in_key("writes a machine file, no run")
                  .showing(kNoConfig));
  r.push_back(many(
                  "--trace-ranks", kGroupProjection,
                  "ranks --trace records: a comma list, or all (at most 256 ranks); default 0",
                  IntegerOr<int>{{0, (1 << 24) - 1}, "all", -1},
                  [](auto& o) -> auto& { return o.projection.trace_ranks; }, true)
                  .in(kProject)
                  .not_in_key("what the trace file shows, not the run")
                  .showing(kNoConfig));
  return r;
}

std::vector<RunOption> advisor_rows() {
  std::vector<RunOption> r;
  r.push_back(one(
                  "--memory-cap", kGroupAdvisor,
                  "device memory per rank a layout must fit, GB (default: the machine's "
                  "memory_GB; the smaller of the two when both are given)",
                  Real{0, 1e6, true}, [](auto& o) -> auto& { return o.advise.memory_cap_gb; })
                  .in(kAdvise)
                  .not_in_key("the advisor writes no results file"));
  r.push_back(one(
                  "--top", kGroupAdvisor, "rows of the ranked table", Integer<int>{1, 1000},
                  [](auto& o) -> auto& { return o.advise.top; })
                  .in(kAdvise)
                  .not_in_key(kFormatOnly));
  r.push_back(one(
                  "--time-limit", kGroupAdvisor,
                  "seconds the search may take: it stops before a projection that would "
                  "overrun (and says so)",
                  Real{0, 86400, true}, [](auto& o) -> auto& { return o.advise.time_limit_s; })
                  .in(kAdvise)
                  .not_in_key("the advisor writes no results file"));
  r.push_back(one(
                  "--tolerance", kGroupAdvisor,
                  "percent: candidates within it of the fastest projected step count as equally "
                  "fast, and among them the fewest changed knobs, then the least memory, win",
                  Real{0, 100, false}, [](auto& o) -> auto& { return o.advise.tolerance_pct; })
                  .in(kAdvise)
                  .not_in_key("the advisor writes no results file"));
  r.push_back(one(
                  "--max-passes", kGroupAdvisor, "coordinate-descent passes at most",
                  Integer<int>{1, 20}, [](auto& o) -> auto& { return o.advise.max_passes; })
                  .in(kAdvise)
                  .not_in_key("the advisor writes no results file"));
  r.push_back(one(
                  "--write-config", kGroupAdvisor,
                  "write the winner as a config file (YAML) that dmuon_bench --config and "
                  "dmuon_project --config accept",
                  Text{"a path"}, [](auto& o) -> auto& { return o.advise.write_config; })
                  .in(kAdvise)
                  .not_in_key(kWhereOnly));
  return r;
}

std::vector<RunOption> inspect_rows() {
  std::vector<RunOption> r;
  r.push_back(one(
                  "--layout", kGroupInspect,
                  "named R x G x T layout setting --world-size, --replicate and --tp "
                  "(docs/METRICS.md)",
                  Text{"a layout name"}, [](auto& o) -> auto& { return o.layout; })
                  .in(kInspect)
                  .not_in_key("sets --world-size, --replicate and --tp, which are keyed"));
  r.push_back(one(
                  "--max-rows", kGroupInspect, "rows per table in the human output",
                  Integer<std::int64_t>{0, std::int64_t{1} << 30},
                  [](auto& o) -> auto& { return o.max_rows; })
                  .in(kInspect)
                  .not_in_key(kFormatOnly));
  return r;
}

std::vector<RunOption> make_table() {
  std::vector<RunOption> all;
  for (auto part : {model_rows, sweep_rows, plan_rows, partition_rows, layout_rows, step_rows,
                    optimizer_rows, clip_accum_rows, work_rows, run_rows, output_rows,
                    projection_rows, advisor_rows, inspect_rows})
    for (auto& row : part()) all.push_back(std::move(row));
  return all;
}

}  // namespace

const std::vector<RunOption>& run_option_table() {
  static const std::vector<RunOption> table = make_table();
  return table;
}

const RunOption& run_option(const std::string& key) {
  for (const auto& o : run_option_table())
    if (o.key_name() == key) return o;
  throw InputError(fmt::format("no option '{}'", key));
}

}  // namespace dmuon::apps::options
