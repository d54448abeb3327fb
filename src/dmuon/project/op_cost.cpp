#include "dmuon/project/op_cost.hpp"

#include <algorithm>

#include "dmuon/base/error.hpp"
#include "dmuon/engine/step/grad_clip.hpp"
#include "dmuon/engine/step/optimizer_config.hpp"
#include "dmuon/project/compute_contention.hpp"
#include "dmuon/project/reduced_layout.hpp"

namespace dmuon::project {

using engine::GroupKind;
using engine::ParamLayout;
using engine::Storage;

kernels::Dtype compute_type(const Machine& machine, const engine::StepSpec& step) {
  if (machine.device != DeviceKind::gpu) return kernels::Dtype::f32;
  return step.compute_dtype ? engine::activation_dtype(*step.compute_dtype) : kernels::Dtype::bf16;
}

OpCost::OpCost(const Machine& machine, const engine::EngineOptions& options, int world)
    : OpCost(machine, options, world, Twin{}) {
  held_sms_ = reference_held_sms(machine);
  if (held_sms_ > 0) {
    held_machine_ = std::make_unique<Machine>(with_sms_held(machine, held_sms_));
    held_.reset(new OpCost(*held_machine_, options, world, Twin{}));
  }
}

OpCost::~OpCost() = default;

OpCost::OpCost(const Machine& machine, const engine::EngineOptions& options, int world, Twin)
    : cost_(machine, compute_share(machine, world)),
      compute_mode_(options.step.compute),
      gpu_(machine.device == DeviceKind::gpu),
      fsdp2_(options.step.fsdp2),
      op_time_(machine, compute_type(machine, options.step), compute_share(machine, world)) {
  wire_ = options.step.wire;
  compute_ = compute_type(machine, options.step);
  ns_ = gpu_ ? options.backend.ns_dtype : kernels::Dtype::f32;
  w_ = static_cast<double>(kernels::dtype_bytes(wire_));
  g_ = static_cast<double>(kernels::dtype_bytes(options.step.reduce_dtype()));
  n_ = static_cast<double>(kernels::dtype_bytes(ns_));
  p_ = static_cast<double>(kernels::dtype_bytes(options.step.param));
  ns_config_ = engine::muon_config(options).ns;
  step_ = options.step;
  if (options.step.float8()) {
    fp8_peak_flops(machine);  // refused (one line naming the machine) where there is none
    if (!options.step.activation)
      throw InputError(
          "--compute-dtype fp8 needs --seq-len (the step work names the linears "
          "torchtitan runs in float8)");
    float8_params_ = options.step.activation->float8_params;
  }
}

bool OpCost::float8(const ParamLayout& p) const {
  return std::binary_search(float8_params_.begin(), float8_params_.end(), p.pid);
}

double OpCost::linear_gemm(std::int64_t m, std::int64_t n, std::int64_t k, bool fp8) const {
  return fp8 ? cost_.gemm_fp8(m, n, k) : cost_.gemm(m, n, k, compute_);
}

double OpCost::forward(const ParamLayout& p, std::int64_t local) const {
  if (compute_of(p) == engine::Compute::none || local <= 0 || p.shape.cols <= 0) return 0;
  const std::int64_t b = local, rows = p.shape.rows, cols = p.shape.cols;
  double s = cost_.synthetic(b * cols, compute_);
  if (!gpu_) s += cost_.synthetic(b * rows, compute_);  // the host draws T with X
  return s + linear_gemm(b, rows, cols, float8(p));
}

// FSDP2 (the FSDP the baselines stand for: torchtitan's) interleaves a group's shards in one
// all-gather buffer and copies each parameter out of it on the compute stream after the gather
// (foreach_all_gather_copy_out: split_with_sizes_copy), and before a reduce-scatter copies the
// group's gradients into one buffer (foreach_reduce_scatter_copy_in: _chunk_cat), which the
// compute stream waits for. Each reads and writes every element once: HBM bytes at the
// memory-bound rate (memory_bound_efficiency: STREAM-type copy benchmarks). The engine's own
// CUDA backend gathers in place and does not copy (docs/PROJECTION.md).
double OpCost::fsdp2_copy_out(const ParamLayout& p) const {
  if (!fsdp2_ || !p.sharded()) return 0;
  const double e = wire_bytes(p), n = static_cast<double>(p.numel);
  return op_time_.seconds(work::memory_op("fsdp2_copy_out", n * e, n * e, 0, 0));
}

// The copy-in reads the gradient autograd produced, in the weights' type, and writes the
// reduce-scatter's input in the reduce type (FSDP2's reduce_dtype: torchtitan's fp32).
double OpCost::fsdp2_copy_in(const ParamLayout& p) const {
  if (!fsdp2_ || !p.sharded()) return 0;
  const double n = static_cast<double>(p.numel);
  return op_time_.seconds(
      work::memory_op("fsdp2_copy_in", n * wire_bytes(p), n * grad_bytes(p), 0, 0));
}

double OpCost::backward(const ParamLayout& p, std::int64_t local) const {
  const std::int64_t rows = p.shape.rows, cols = p.shape.cols, b = local;
  double s = 0;
  if (compute_of(p) == engine::Compute::none) {
    s = cost_.synthetic(p.numel, p.grad_wire);
  } else if (b <= 0 || p.numel == 0) {
    s = cost_.elementwise(static_cast<double>(p.numel) * grad_bytes(p));
  } else {
    if (gpu_) s += cost_.synthetic(b * rows, compute_);
    s += cost_.elementwise(3.0 * static_cast<double>(b * rows) *
                           static_cast<double>(kernels::dtype_bytes(compute_)));
    s += linear_gemm(b, cols, rows, float8(p));  // dX = dY·W
    s += linear_gemm(rows, cols, b, float8(p));  // dW = dYᵀ·X
  }
  if (p.padding() > 0) s += cost_.elementwise(static_cast<double>(p.padding()) * grad_bytes(p));
  return s + fsdp2_copy_in(p);
}

double OpCost::pack(const engine::StepLayout& L, int group) const {
  const auto& g = L.groups[static_cast<std::size_t>(group)];
  double s = 0;
  switch (g.kind) {
    case GroupKind::dmuon_site:
      for (int pi : g.pairs) {
        const auto& pr = L.pairs[static_cast<std::size_t>(pi)];
        if (pr.rooted_here) s += cost_.elementwise(static_cast<double>(pr.numel) * (p_ + w_));
      }
      break;
    case GroupKind::fsdp:
      // Each gather (forward; Z3 also backward) packs the shard and copies the gathered
      // parameter out (placed here, before the gather: the compute stream's total is the same).
      for (int pi : g.members) {
        const auto& p = L.params[static_cast<std::size_t>(pi)];
        s += cost_.elementwise(static_cast<double>(p.chunk) * (p_ + wire_bytes(p))) +
             fsdp2_copy_out(p);
      }
      break;
    case GroupKind::ddp:
    case GroupKind::expert:  // --ep: the rank's experts' compute copy, as a replica's
      for (int pi : g.members) {
        const auto& p = L.params[static_cast<std::size_t>(pi)];
        // The host computes on fp32 replicas directly: nothing to convert then.
        if (!gpu_ && wire_bytes(p) == 4) continue;
        s += cost_.elementwise(static_cast<double>(p.numel) * (p_ + wire_bytes(p)));
      }
      break;
  }
  return s;
}

double OpCost::prepare(const engine::StepLayout& L, int group) const {
  double s = 0;
  for (int pi : L.groups[static_cast<std::size_t>(group)].members) {
    const auto& p = L.params[static_cast<std::size_t>(pi)];
    if (!p.updated_here || !p.muon) continue;
    if (p.storage == Storage::sharded)
      s += cost_.elementwise(static_cast<double>(p.chunk) *
                             (grad_bytes(p) + wire_bytes(p) + 2 * p_));
    else
      s += cost_.elementwise(static_cast<double>(p.numel) * (g_ + 2 * p_ + n_));
  }
  return s;
}

double OpCost::newton_schulz(const ParamLayout& p) const {
  if (free_ns_) return 0;
  // --tp: the TP owner orthogonalizes the logical matrix it gathered.
  const engine::MatrixShape& m = p.tp_sharded() ? p.logical : p.shape;
  const auto key = std::make_pair(m.rows, m.cols);
  double s = 0;
  {
    std::lock_guard<std::mutex> lock(ns_mutex_);
    auto it = ns_cache_.find(key);
    if (it == ns_cache_.end())
      it = ns_cache_.emplace(key, cost_.newton_schulz(m.rows, m.cols, ns_config_, ns_, ns_)).first;
    s = it->second;
  }
  if (p.storage == Storage::sharded && (p.alt_wire ? p.wire : wire_) != ns_)
    s += cost_.elementwise(static_cast<double>(p.numel) * (wire_bytes(p) + n_));
  return s;
}

double OpCost::apply(const ParamLayout& p, int column) const {
  if (p.muon) {
    const std::int64_t len = p.sharded() ? p.shard_len_at(column) : p.numel;
    return cost_.elementwise(static_cast<double>(len) * (2 * p_ + n_));
  }
  return cost_.elementwise(static_cast<double>(p.state_elems) * (6 * p_ + grad_bytes(p)));
}

double OpCost::activation(const engine::StepLayout& L, const engine::StepOp& op) const {
  if (!L.activation || compute_mode_ == engine::Compute::none) return 0;
  const auto& unit = L.activation->units.at(static_cast<std::size_t>(op.param));
  switch (op.op) {
    case engine::Op::act_forward: return op_time_.seconds(unit.forward);
    case engine::Op::act_recompute: return op_time_.seconds(unit.recompute);
    case engine::Op::act_backward: return op_time_.seconds(unit.backward);
    default: return 0;
  }
}

// The engine's clip ops (host_backend.cpp, cuda_backend.cpp) walk the parameters updated here;
// a reduced layout's aggregate stands for members updated elsewhere.
double OpCost::clip_partial(const engine::StepLayout& L) const {
  std::int64_t counted = 0;
  for (const auto& p : L.params)
    if (p.updated_here && !is_aggregate(p)) counted += engine::clip_counted(L, p).count;
  return cost_.elementwise(static_cast<double>(counted) * g_);
}

double OpCost::clip_scale(const engine::StepLayout& L) const {
  std::int64_t scaled = 0;
  for (const auto& p : L.params)
    if (p.updated_here && !is_aggregate(p)) scaled += p.own_elems();
  return cost_.elementwise(static_cast<double>(scaled) * 2 * g_);
}

}  // namespace dmuon::project
