#pragma once
// What one engine run does: method, resharding mode, synthetic compute, batch and step counts.
// Validated before the first collective so every rank rejects bad input alike (exit 2).

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dmuon/engine/step/activation_work.hpp"
#include "dmuon/engine/step/method.hpp"
#include "dmuon/engine/step/pipeline_order.hpp"
#include "dmuon/plan/comm_volume.hpp"
#include "kernels/dtype.hpp"
#include "kernels/ns_coefficients.hpp"

namespace dmuon::engine {

const char* method_name(Method m);
/// "dmuon" | "fsdp-adamw" | "fsdp-muon" | "ddp-muon" | "ddp-dmuon"; throws InputError otherwise.
Method parse_method(std::string_view s);
/// Each entry may be a comma list; empty entries are ignored; duplicates kept in order.
std::vector<Method> parse_method_list(const std::vector<std::string>& args);

/// Synthetic per-Linear compute (see synthetic.hpp) or none (deterministic synthetic grads).
enum class Compute { gemm, none };
const char* compute_name(Compute c);
Compute parse_compute(std::string_view s);

/// Where the step runs: host (Open MPI + Kokkos) or cuda (NCCL + cuBLAS, one GPU per rank).
enum class Device { host, cuda };
const char* device_name(Device d);
Device parse_device(std::string_view s);

/// How the optimizer walks its groups (the Muon/AdamW math is the same either way).
enum class OptimizerPipeline {
  per_group,  ///< the reference: per group in forward order wait, prepare, NS, apply, publish
  all_then_publish,  ///< every group's NS first, then every update, then every publish
};
const char* optimizer_pipeline_name(OptimizerPipeline p);
OptimizerPipeline parse_optimizer_pipeline(std::string_view s);

/// How a DMuon step is scheduled (docs/REFERENCE-STEP.md in the shared docs: the reference's
/// code read term by term; step_schedule.hpp says what each one changes).
enum class DmuonSchedule {
  /// The reference's default step: one site's reduce in flight, the owners' Newton–Schulz
  /// after the whole reduce tail and before AdamW, no barrier between steps (the next
  /// forward's broadcast waits for its owner's optimizer), a group of rooted collectives run
  /// one after another inside its NCCL launch, one communicator's collectives in issue order.
  reference,
  /// The suite's earlier, idealised step: a grad ring of prefetch + 2 slots in flight, the
  /// optimizer in group order from the AdamW unit on, a world barrier before every step,
  /// independent streams, a group's collectives concurrent. What a better DMuon would save.
  overlapped,
};
const char* dmuon_schedule_name(DmuonSchedule s);

/// The type the reference's DMuon keeps Muon's momentum in: the gradient's (its buffer is a
/// clone of the reduced gradient, dmuon/optim/muon.py 1687-1690) or fp32. The projection's
/// memory model reads it under the reference's schedule; the engine's own executors keep fp32.
enum class MomentumDtype { grad, fp32 };
const char* momentum_dtype_name(MomentumDtype m);

/// The norm --clip-norm bounds (grad_clip.hpp): the 2-norm or the max-norm of all gradients.
enum class ClipNormType { two, inf };

/// "fp32" | "bf16" (the wire types of --comm-dtype) and "fp16" (--ns-dtype).
kernels::Dtype parse_dtype(std::string_view s, std::string_view flag, bool allow_f16);
const char* dtype_flag_name(kernels::Dtype t);

/// The type a step's GEMMs compute in (--compute-dtype). fp8 is projection-only (no kernel of
/// kernels/ computes in it, so kernels::Dtype has no such member): torchtitan's float8 training
/// (torchao Float8Linear, tensorwise dynamic scaling) — its Linear layers' GEMMs in fp8, every
/// other op (attention, norms, the output head) in bf16 (work/float8.hpp).
enum class ComputeDtype { f32, bf16, f16, fp8 };
/// "fp32" | "bf16" | "fp16" | "fp8".
const char* compute_dtype_name(ComputeDtype t);
/// The type activations and the GEMMs not run in fp8 compute in: fp8 runs them in bf16.
kernels::Dtype activation_dtype(ComputeDtype t);
/// "gram" | "direct".
kernels::NsVariant parse_ns_variant(std::string_view s);

struct AdamwEpsRegime;  // reference.hpp

/// What --check compares with when EngineOptions::check_reference is set: the weights per
/// parameter in tree.parameter_order() and, when the reference knows them (a reference file
/// does), its AdamW elements in the eps regime, which fp32 checks excuse (reference.hpp).
struct ReferenceWeights {
  ReferenceWeights(std::vector<std::vector<float>> w = {})  // NOLINT: weights alone convert
      : weights(std::move(w)) {}
  std::vector<std::vector<float>> weights;
  std::shared_ptr<const AdamwEpsRegime> eps_regime;
};

/// Largest --accum accepted.
inline constexpr int kMaxAccum = 1024;

/// What one step communicates and computes: the method, its resharding and schedule knobs,
/// the wire type and the batch. The step layout, the step schedule and the volume model
/// derive from it alone; it is the one home of the wire dtype.
struct StepSpec {
  Method method = Method::dmuon;
  plan::Reshard reshard = plan::Reshard::z3;
  /// Weight collectives (broadcasts / all-gathers) kept in flight ahead of the group being
  /// computed: 0 = issue each group's just before its compute; k = also the next k groups
  /// (the reference prefetches 1).
  int prefetch = 1;
  OptimizerPipeline pipeline = OptimizerPipeline::per_group;
  /// Gradient accumulation (accumulation.hpp): the step's global batch in `accum`
  /// micro-batches, forward + backward each, gradients reduced after the last one only.
  int accum = 1;
  /// Parameters and gradients on the wire (and the weights compute reads); masters, momentum
  /// and AdamW state stay fp32. bf16 is what the reference's benchmarks run.
  kernels::Dtype wire = kernels::Dtype::f32;
  /// The type the parameters themselves are kept in (--param-dtype; dmuon_project and
  /// dmuon_advise only, the engine keeps fp32 masters): each rank's master shard, its optimizer
  /// state (torch's optimizers keep their state in the parameter's type) and the gradient
  /// autograd accumulates (a parameter's .grad has its type). NeMo AutoModel casts its MoE
  /// models to bf16 (cast_model_to_dtype) and trains them so.
  kernels::Dtype param = kernels::Dtype::f32;
  /// Gradients on the wire (--reduce-dtype): every gradient collective (reduces to owners,
  /// reduce-scatters, all-reduces, HSDP stage 2) and the buffers they read, while the weights
  /// travel in `wire`; torchtitan's FSDP2 default is bf16 weights with fp32 gradients. Unset:
  /// `wire` (read it through reduce_dtype()).
  std::optional<kernels::Dtype> reduce{};
  /// dmuon: one reduce per parameter (the reference) or per (site, owner) packed buffer.
  plan::GradReduce grad_reduce = plan::GradReduce::per_param;
  /// Global-norm gradient clipping (grad_clip.hpp): 0 = off; else every gradient is scaled by
  /// min(1, clip_norm / (‖g‖ + 1e-6)) before the optimizer, ‖g‖ over every parameter.
  double clip_norm = 0;
  ClipNormType clip_norm_type = ClipNormType::two;
  Compute compute = Compute::gemm;
  /// The compute of parameter `pid`'s synthetic Linear: `compute`, but none for a parameter
  /// the activation work looks up (an input embedding: its forward is the lookup, its gradient
  /// the lookup's backward, both in the activation work; the engine fills its gradient as
  /// --compute none does, so backends and the --check reference agree).
  Compute compute_of(int pid) const;
  std::int64_t tokens = 64;        ///< per rank; used when global_tokens == 0
  std::int64_t global_tokens = 0;  ///< global batch in samples; 0 = tokens x G
  /// HSDP: stage 2 of a group is issued this many groups after its stage 1.
  int stage2_lag = 1;
  /// FSDP groups run as torchtitan's FSDP2 on a GPU (set by the projection on GPU machines):
  /// one reduce-scatter input in flight (FSDP2's ReduceScatterState: before a group's
  /// gradients are copied into its reduce input, the compute stream waits for the previous
  /// FSDP group's reduce, whose input is then freed), autograd's gradients in the weights'
  /// type until that copy-in, and the copies FSDP2 makes around its collectives (priced by
  /// the projection's OpCost). The engine's own executors keep their grad ring.
  bool fsdp2 = false;
  /// The step's activation work beyond the parameters' GEMMs (activation_work.hpp): attention,
  /// norms, activations, loss, routing, recompute; null = parameter work only.
  std::shared_ptr<const ActivationWork> activation{};
  /// The type activations and GEMMs compute in (--compute-dtype); unset: the device's
  /// (fp32 on the host, the wire type on the CUDA backend, bf16 on a projected GPU).
  std::optional<ComputeDtype> compute_dtype{};
  /// Whether the step runs torchtitan's float8 Linears (--compute-dtype fp8).
  bool float8() const { return compute_dtype == ComputeDtype::fp8; }
  /// dmuon: the reference's step or the overlapped one (ignored by the other methods).
  DmuonSchedule dmuon_schedule = DmuonSchedule::reference;
  /// dmuon under the reference's schedule: the momentum's type in the memory model.
  MomentumDtype momentum = MomentumDtype::grad;
  /// --pp: this rank's pipeline stage (pipeline_order.hpp); count 1 without.
  PipelineStages stages{};

  bool clip() const { return clip_norm > 0; }
  /// Whether this step runs the reference's DMuon schedule (dmuon under
  /// DmuonSchedule::reference).
  bool reference_dmuon() const {
    return method == Method::dmuon && dmuon_schedule == DmuonSchedule::reference;
  }
  /// The gradients' wire type: --reduce-dtype, else the weights'.
  kernels::Dtype reduce_dtype() const { return reduce.value_or(wire); }
  /// Global samples for a world of G shard ranks (R x G with HSDP).
  std::int64_t global_samples(int shard) const {
    return global_tokens > 0 ? global_tokens : tokens * shard;
  }
};

/// What runs a step: the device and its Newton–Schulz numerics.
struct BackendSpec {
  Device device = Device::host;
  /// Newton–Schulz form (gram: Gram iteration with the restart, the reference's default).
  kernels::NsVariant ns = kernels::NsVariant::gram;
  /// CUDA only: the type Newton–Schulz reads and writes, fp16 (the reference's), bf16 or fp32;
  /// the norm is always fp32. What runs per matrix (the form and the types of X̃ and of the
  /// Gram matrices) is cuda::ns_numerics' rule (docs/KERNELS.md). The host computes in fp32.
  kernels::Dtype ns_dtype = kernels::Dtype::f16;
};

/// How a run is driven and checked: step counts, data seed, --check, test and progress hooks.
struct RunControl {
  int steps = 5;   ///< measured steps (after warmup)
  int warmup = 1;  ///< unmeasured steps first
  std::uint64_t seed = 1;
  bool check = false;  ///< compare with a one-process recomputation on rank 0
  /// Gather every final weight to rank 0 (RunResult::final_weights); implied by check. Off by
  /// default: a full model on one rank is what a large run cannot afford.
  bool keep_final_weights = false;
  /// When set, --check compares with what this returns (rank 0: per parameter in
  /// tree.parameter_order()) instead of recomputing the one-process reference here: a
  /// reference computed on another machine (reference_file.hpp).
  std::function<ReferenceWeights()> check_reference;
  int inject_nan_step = -1;  ///< test aid: poison a gradient on the last rank at this step
  /// Max Frobenius relative error per parameter accepted by --check; 0 = the default for the
  /// run's dtypes (EngineOptions::effective_check_tolerance).
  double check_tolerance = 0;
  /// Called on every rank after each step (1-based step, total steps incl. warmup); progress
  /// display. Must not communicate.
  std::function<void(int, int)> on_step;
  /// Record this rank's timeline (RunResult::trace_spans; dmuon_bench --trace).
  bool trace = false;

  int total_steps() const { return warmup + steps; }
};

struct EngineOptions {
  StepSpec step;
  BackendSpec backend;
  RunControl run;

  /// run.check_tolerance, or the default that fits the run's dtypes when it is 0;
  /// `route_wire`: the coarsest --route dtype of the plan (Plan::narrowest_route_wire_bytes),
  /// if coarser.
  double effective_check_tolerance(kernels::Dtype route_wire = kernels::Dtype::f32) const;
};

/// Throws InputError (one line) for values no run can use.
void validate(const EngineOptions& o, int world_size);

}  // namespace dmuon::engine
