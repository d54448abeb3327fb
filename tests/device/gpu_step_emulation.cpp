#include "gpu_step_emulation.hpp"

#include <stdexcept>

#include "dmuon/engine/exec/optimizer_step.hpp"
#include "dmuon/engine/step/accumulation.hpp"
#include "dmuon/engine/step/grad_clip.hpp"
#include "dmuon/engine/step/optimizer_config.hpp"
#include "dmuon/engine/step/synthetic.hpp"
#include "kernels/cuda/ns_numerics.hpp"
#include "kernels/cuda/standalone/ns_emulation.hpp"
#include "kernels/linear.hpp"

namespace dmuon::device_check {

namespace {

using engine::EngineOptions;
using kernels::Dtype;
namespace emu = kernels::cuda::emulation;

void round_all(std::vector<float>& v, Dtype t) {
  if (t == Dtype::f32) return;
  for (float& x : v) x = emu::round_to(t, x);
}

// The emulated Newton–Schulz's products through the host BLAS (fp32 accumulation).
void blas_abt(std::size_t m, std::size_t n, std::size_t k, const float* a, const float* b,
              float* c) {
  kernels::host::gemm(false, true, m, n, k, 1.0f, a, b, 0.0f, c);
}

struct Param {
  int pid = -1;
  engine::MatrixShape shape;
  std::size_t numel = 0;
  Dtype wire = Dtype::f32;
  bool muon = false;
  bool gathered_input = false;  // fsdp-muon: the Nesterov input travels in the wire type
  std::int64_t samples = 0;     // n: the global samples it trains on per step
  std::vector<float> master, grad, m, v;
};

// Micro-step `micro`'s forward and backward of one parameter into its wire-typed gradient.
void forward_backward(Param& p, const EngineOptions& o, long step, int micro, bool accumulate) {
  const engine::SampleRange r = engine::micro_sample_range(p.samples, micro, o.step.accum, 0, 1);
  const auto b = static_cast<std::size_t>(r.local());
  const auto rows = static_cast<std::size_t>(p.shape.rows),
             cols = static_cast<std::size_t>(p.shape.cols);
  if (b == 0 || p.numel == 0) {
    if (!accumulate) std::fill(p.grad.begin(), p.grad.end(), 0.0f);
    return;
  }
  std::vector<float> w = p.master, x(b * cols), t(b * rows), y(b * rows);
  round_all(w, p.wire);
  const auto st = static_cast<std::uint64_t>(step), key = static_cast<std::uint64_t>(p.pid);
  for (std::size_t s = 0; s < b; ++s) {
    const auto sample = static_cast<std::uint64_t>(r.begin) + s;
    engine::synthetic_fill_row(o.run.seed, st, sample, key, engine::synthetic_stream::x,
                               &x[s * cols], p.shape.cols);
    engine::synthetic_fill_row(o.run.seed, st, sample, key, engine::synthetic_stream::target,
                               &t[s * rows], p.shape.rows);
  }
  round_all(x, p.wire);
  round_all(t, p.wire);
  kernels::host::gemm(false, true, b, rows, cols, 1.0f, x.data(), w.data(), 0.0f, y.data());
  round_all(y, p.wire);
  const float scale = 1.0f / static_cast<float>(r.n);  // G/n at G = 1
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = (y[i] - t[i]) * scale;
  round_all(y, p.wire);
  kernels::host::gemm(true, false, rows, cols, b, 1.0f, y.data(), x.data(),
                      accumulate ? 1.0f : 0.0f, p.grad.data());
  round_all(p.grad, p.wire);
}

// --clip-norm: every gradient scaled by the coefficient of their joint norm, rounded back.
void clip(std::vector<Param>& params, const EngineOptions& o) {
  double partial = 0;
  for (const Param& p : params)
    engine::clip_accumulate(o.step.clip_norm_type, p.grad.data(),
                            static_cast<std::int64_t>(p.numel), partial);
  const float coef = engine::clip_coefficient(
      o.step.clip_norm, engine::clip_total_norm(o.step.clip_norm_type, partial));
  for (Param& p : params) {
    for (float& g : p.grad) g *= coef;
    round_all(p.grad, p.wire);
  }
}

// One Muon update of p; returns the Newton–Schulz input the GPU holds (in --ns-dtype).
std::vector<float> muon_update(Param& p, engine::HostOptimizer& opt, const EngineOptions& o,
                               long step) {
  std::vector<float> in(p.numel);
  if (opt.prepare(p.grad.data(), p.m.data(), in.data(), p.numel, step) != 0)
    throw std::runtime_error("gpu step emulation: a non-finite gradient");
  if (p.gathered_input) round_all(in, p.wire);
  round_all(in, o.backend.ns_dtype);
  const auto rows = static_cast<std::size_t>(p.shape.rows),
             cols = static_cast<std::size_t>(p.shape.cols);
  const kernels::NsConfig cfg = opt.muon().ns;
  const auto num = kernels::cuda::ns_numerics(rows, cols, o.backend.ns_dtype, cfg.variant);
  const std::vector<float> out =
      emu::newton_schulz(in, rows, cols, cfg, o.backend.ns_dtype, num, false, blas_abt);
  opt.apply(p.master.data(), out.data(), p.numel, p.shape.rows, p.shape.cols);
  return in;
}

std::vector<Param> make_params(const model::ModuleTree& tree, const plan::Plan& plan,
                               const EngineOptions& o) {
  std::vector<Param> params;
  const auto global = o.step.global_samples(1);
  const int run_bytes = static_cast<int>(kernels::dtype_bytes(o.step.wire));
  for (int pid : tree.parameter_order()) {
    Param p;
    p.pid = pid;
    p.shape = engine::matrix_shape(tree.parameter(pid));
    p.numel = static_cast<std::size_t>(tree.parameter(pid).numel());
    p.wire = plan.wire_bytes(pid, run_bytes) == 2 ? Dtype::bf16 : Dtype::f32;
    p.muon = runs_muon(plan, o, pid);
    p.gathered_input = p.muon && o.step.method == engine::Method::fsdp_muon;
    p.samples = engine::param_samples(tree, pid, global);
    p.master.resize(p.numel);
    engine::init_weights(o.run.seed, static_cast<std::uint64_t>(pid), p.master.data(),
                         static_cast<std::int64_t>(p.numel), p.shape.cols);
    p.grad.assign(p.numel, 0.0f);
    p.m.assign(p.numel, 0.0f);
    p.v.assign(p.numel, 0.0f);
    params.push_back(std::move(p));
  }
  return params;
}

}  // namespace

bool runs_muon(const plan::Plan& plan, const EngineOptions& o, int pid) {
  return plan.hooks.site_of_param[static_cast<std::size_t>(pid)] >= 0 && plan.muon(pid) &&
         o.step.method != engine::Method::fsdp_adamw;
}

EmulatedRun emulate_gpu_run(const model::ModuleTree& tree, const plan::Plan& plan,
                            const EngineOptions& o) {
  if (o.step.compute != engine::Compute::gemm)
    throw std::invalid_argument("gpu step emulation: --compute gemm only");
  std::vector<Param> params = make_params(tree, plan, o);
  engine::HostOptimizer opt(engine::muon_config(o));
  EmulatedRun run;
  run.step1_ns_inputs.resize(params.size());
  for (long step = 1; step <= o.run.total_steps(); ++step) {
    for (Param& p : params)
      for (int j = 0; j < o.step.accum; ++j) forward_backward(p, o, step, j, j > 0);
    if (o.step.clip_norm > 0) clip(params, o);
    for (std::size_t i = 0; i < params.size(); ++i) {
      Param& p = params[i];
      if (p.muon) {
        auto in = muon_update(p, opt, o, step);
        if (step == 1) run.step1_ns_inputs[i] = std::move(in);
      } else if (opt.adamw(p.master.data(), p.grad.data(), p.m.data(), p.v.data(), p.numel, step) !=
                 0) {
        throw std::runtime_error("gpu step emulation: a non-finite gradient");
      }
    }
  }
  for (Param& p : params) run.weights.push_back(std::move(p.master));
  return run;
}

}  // namespace dmuon::device_check
