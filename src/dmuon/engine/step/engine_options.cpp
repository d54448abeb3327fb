#include "dmuon/engine/step/engine_options.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "dmuon/base/comma_list.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/engine/step/activation_work.hpp"

namespace dmuon::engine {

const char* method_name(Method m) {
  switch (m) {
    case Method::dmuon: return "dmuon";
    case Method::fsdp_adamw: return "fsdp-adamw";
    case Method::fsdp_muon: return "fsdp-muon";
    case Method::ddp_muon: return "ddp-muon";
    case Method::ddp_dmuon: return "ddp-dmuon";
  }
  return "?";
}

Method parse_method(std::string_view s) {
  for (Method m :
       {Method::dmuon, Method::fsdp_adamw, Method::fsdp_muon, Method::ddp_muon, Method::ddp_dmuon})
    if (s == method_name(m)) return m;
  throw InputError(fmt::format(
      "unknown method '{}' (valid: dmuon, fsdp-adamw, fsdp-muon, ddp-muon, ddp-dmuon)", s));
}

std::vector<Method> parse_method_list(const std::vector<std::string>& args) {
  std::vector<Method> out;
  for (const auto& word : split_comma_lists(args, "--method")) out.push_back(parse_method(word));
  if (out.empty())
    throw InputError(
        "--method names no method (valid: dmuon, fsdp-adamw, fsdp-muon, ddp-muon, ddp-dmuon)");
  return out;
}

const char* device_name(Device d) {
  return d == Device::host ? "host" : "cuda";
}

Device parse_device(std::string_view s) {
  if (s == "host") return Device::host;
  if (s == "cuda") return Device::cuda;
  throw InputError(fmt::format("unknown device '{}' (valid: host, cuda)", s));
}

const char* optimizer_pipeline_name(OptimizerPipeline p) {
  return p == OptimizerPipeline::per_group ? "per-group" : "all-then-publish";
}

const char* dmuon_schedule_name(DmuonSchedule s) {
  return s == DmuonSchedule::reference ? "reference" : "overlapped";
}

const char* momentum_dtype_name(MomentumDtype m) {
  return m == MomentumDtype::grad ? "grad" : "fp32";
}

OptimizerPipeline parse_optimizer_pipeline(std::string_view s) {
  if (s == "per-group") return OptimizerPipeline::per_group;
  if (s == "all-then-publish") return OptimizerPipeline::all_then_publish;
  throw InputError(
      fmt::format("unknown optimizer pipeline '{}' (valid: per-group, all-then-publish)", s));
}

const char* compute_dtype_name(ComputeDtype t) {
  switch (t) {
    case ComputeDtype::f32: return "fp32";
    case ComputeDtype::bf16: return "bf16";
    case ComputeDtype::f16: return "fp16";
    case ComputeDtype::fp8: return "fp8";
  }
  return "?";
}

kernels::Dtype activation_dtype(ComputeDtype t) {
  switch (t) {
    case ComputeDtype::f32: return kernels::Dtype::f32;
    case ComputeDtype::f16: return kernels::Dtype::f16;
    case ComputeDtype::bf16:
    case ComputeDtype::fp8: return kernels::Dtype::bf16;
  }
  return kernels::Dtype::bf16;
}

const char* dtype_flag_name(kernels::Dtype t) {
  switch (t) {
    case kernels::Dtype::f32: return "fp32";
    case kernels::Dtype::bf16: return "bf16";
    case kernels::Dtype::f16: return "fp16";
  }
  return "?";
}

kernels::Dtype parse_dtype(std::string_view s, std::string_view flag, bool allow_f16) {
  if (s == "fp32" || s == "f32") return kernels::Dtype::f32;
  if (s == "bf16") return kernels::Dtype::bf16;
  if (allow_f16 && (s == "fp16" || s == "f16")) return kernels::Dtype::f16;
  throw InputError(fmt::format("{} '{}' is invalid (valid: {})", flag, s,
                               allow_f16 ? "fp16, bf16, fp32" : "fp32, bf16"));
}

kernels::NsVariant parse_ns_variant(std::string_view s) {
  if (s == "gram") return kernels::NsVariant::gram;
  if (s == "direct") return kernels::NsVariant::direct;
  throw InputError(fmt::format("--ns '{}' is invalid (valid: gram, direct)", s));
}

namespace {

// Unit roundoff of a storage type (half the distance from 1 to the next value).
double unit_roundoff(kernels::Dtype t) {
  switch (t) {
    case kernels::Dtype::f32: return 0x1p-24;
    case kernels::Dtype::bf16: return 0x1p-8;
    case kernels::Dtype::f16: return 0x1p-11;
  }
  return 0x1p-24;
}

}  // namespace

double EngineOptions::effective_check_tolerance(kernels::Dtype route_wire) const {
  if (run.check_tolerance > 0) return run.check_tolerance;
  // All fp32: sums of the same samples in another order differ by ~1e-7 relative; Newton–
  // Schulz's normalisation and quintic iterations amplify that by O(10–100) over a few steps,
  // so 1e-4 leaves ~10x margin. A 16-bit type on the wire or in the device's Newton–Schulz
  // rounds every value it touches: allow 8 unit roundoffs of the coarsest one (bf16: 3.1e-2,
  // fp16: 3.9e-3); the measured errors are in docs/METRICS.md.
  double u = std::max(
      {unit_roundoff(step.wire), unit_roundoff(step.reduce_dtype()), unit_roundoff(route_wire)});
  if (backend.device == Device::cuda) u = std::max(u, unit_roundoff(backend.ns_dtype));
  return u <= 0x1p-24 ? 1e-4 : 8 * u;
}

Compute StepSpec::compute_of(int pid) const {
  if (compute == Compute::none || !activation) return compute;
  const auto& l = activation->lookup_params;
  return std::binary_search(l.begin(), l.end(), pid) ? Compute::none : compute;
}

const char* compute_name(Compute c) {
  return c == Compute::gemm ? "gemm" : "none";
}

Compute parse_compute(std::string_view s) {
  if (s == "gemm") return Compute::gemm;
  if (s == "none") return Compute::none;
  throw InputError(fmt::format("unknown compute mode '{}' (valid: gemm, none)", s));
}

namespace {

// --pp in the engine (pipeline_order.hpp).
void validate_stages(const EngineOptions& o) {
  const PipelineStages& p = o.step.stages;
  if (p.count < 1 || p.count > 64)
    throw InputError(fmt::format("--pp {} is invalid (valid: 1..64 stages)", p.count));
  if (!p.active()) return;
  if (p.stage < 0 || p.stage >= p.count || p.runs < 1 || o.step.accum % p.runs != 0)
    throw std::logic_error(fmt::format("pipeline stage {} of {}, {} runs of --accum {}", p.stage,
                                       p.count, p.runs, o.step.accum));
  if (p.message_elems < 1)
    throw InputError(fmt::format(
        "--pp {}: the stage boundary's message is empty (the engine's pipeline needs --seq-len "
        "and a model with a hidden size)",
        p.count));
  // The host's boundary buffers, bounded alike on every stage (an inner stage's: the most).
  constexpr double kMaxBytes = 4.0 * (1 << 30);  // as the activation work's scratch
  const double need = pipeline_buffer_bytes(p, o.step.accum);
  if (need > kMaxBytes)
    throw InputError(fmt::format(
        "--pp {}: a stage's boundary buffers need {:.1f} GiB ({} micro-batches of {} fp32 "
        "elements each way; at most {:.0f}): lower --seq-len, --micro-batch or --accum",
        p.count, need / (1 << 30), o.step.accum, p.message_elems, kMaxBytes / (1 << 30)));
  if (o.backend.device != Device::host)
    throw InputError(
        fmt::format("--pp {} runs on --device host (the CUDA backend has no stage sends yet; "
                    "dmuon_project projects GPU pipelines)",
                    p.count));
  if (o.step.clip())
    throw InputError(fmt::format(
        "--pp {} with --clip-norm: the norm spans every stage's gradients, which the engine's "
        "stages do not combine (valid: --clip-norm 0 with --pp)",
        p.count));
}

}  // namespace

void validate(const EngineOptions& o, int world_size) {
  const StepSpec& st = o.step;
  const RunControl& run = o.run;
  if (world_size < 1) throw InputError(fmt::format("world size {} is invalid", world_size));
  if (run.steps < 1)
    throw InputError(fmt::format("--steps {} is invalid (must be >= 1)", run.steps));
  if (run.warmup < 0)
    throw InputError(fmt::format("--warmup {} is invalid (must be >= 0)", run.warmup));
  if (st.tokens < 1)
    throw InputError(fmt::format("--tokens {} is invalid (must be >= 1)", st.tokens));
  if (st.global_tokens < 0)
    throw InputError(fmt::format("--global-tokens {} is invalid (must be >= 1)", st.global_tokens));
  if (st.tokens > (std::int64_t{1} << 24) || st.global_tokens > (std::int64_t{1} << 28))
    throw InputError("--tokens/--global-tokens too large (max 2^24 per rank, 2^28 global)");
  if (run.inject_nan_step < -1 || run.inject_nan_step == 0 ||
      run.inject_nan_step > run.total_steps())
    throw InputError(fmt::format("--inject-nan-step {} is invalid (valid: 1..{} = warmup + steps)",
                                 run.inject_nan_step, run.total_steps()));
  if (st.prefetch < 0 || st.prefetch > 64)
    throw InputError(
        fmt::format("--prefetch {} is invalid (valid: 0..64 groups ahead)", st.prefetch));
  if (!(run.check_tolerance >= 0))
    throw InputError(fmt::format(
        "--check-tolerance {} is invalid (must be > 0, or 0 for the default of the dtypes)",
        run.check_tolerance));
  if (!(st.clip_norm >= 0) || st.clip_norm > 1e30)
    throw InputError(
        fmt::format("--clip-norm {} is invalid (must be a finite number > 0)", st.clip_norm));
  if (st.accum < 1 || st.accum > kMaxAccum)
    throw InputError(
        fmt::format("--accum {} is invalid (valid: 1..{} micro-batches)", st.accum, kMaxAccum));
  if (st.wire == kernels::Dtype::f16)
    throw InputError("--comm-dtype fp16 is not supported (valid: fp32, bf16)");
  if (st.reduce_dtype() == kernels::Dtype::f16)
    throw InputError("--reduce-dtype fp16 is not supported (valid: fp32, bf16)");
  validate_stages(o);
}

}  // namespace dmuon::engine
