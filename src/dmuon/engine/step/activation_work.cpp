#include "dmuon/engine/step/activation_work.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "dmuon/base/error.hpp"
#include "dmuon/work/attention_ops.hpp"

namespace dmuon::engine {

bool is_parameter_gemm(const work::Op& op) {
  return op.kind == work::OpKind::gemm && (op.param >= 0 || op.member >= 0);
}

namespace {

std::vector<work::Op> without_parameter_gemms(const std::vector<work::Op>& ops) {
  std::vector<work::Op> out;
  for (const auto& op : ops)
    if (!is_parameter_gemm(op)) out.push_back(op);
  return out;
}

}  // namespace

bool is_activation_op(Op op) {
  return op == Op::act_forward || op == Op::act_recompute || op == Op::act_backward;
}

const std::vector<work::Op>& unit_ops(const ActivationWork& work, const StepOp& op) {
  if (!is_activation_op(op.op))
    throw std::logic_error(std::string("unit_ops: ") + op_name(op.op) + " runs no activation work");
  const auto& unit = work.units.at(static_cast<std::size_t>(op.param));
  return op.op == Op::act_forward     ? unit.forward
         : op.op == Op::act_recompute ? unit.recompute
                                      : unit.backward;
}

std::shared_ptr<const ActivationWork> activation_work(const work::StepWork& work) {
  auto out = std::make_shared<ActivationWork>();
  if (!work.has_geometry) out->note = work.note;
  for (const auto& u : work.units) {
    for (const auto& op : u.forward)
      if (op.float8 && op.param >= 0) out->float8_params.push_back(op.param);
    ActivationUnit a;
    a.forward = without_parameter_gemms(u.forward);
    a.recompute = u.recompute;  // recomputed linears run again: work beyond the parameters'
    a.backward = without_parameter_gemms(u.backward);
    a.module = u.module;
    a.head = u.kind == "head";
    if (a.forward.empty() && a.recompute.empty() && a.backward.empty()) continue;
    out->units.push_back(std::move(a));
  }
  out->lookup_params = work.lookup_params;
  std::sort(out->float8_params.begin(), out->float8_params.end());
  out->float8_params.erase(std::unique(out->float8_params.begin(), out->float8_params.end()),
                           out->float8_params.end());
  return out;
}

std::shared_ptr<const ActivationWork> in_tree_of(const ActivationWork& work,
                                                 const model::ModuleTree& from,
                                                 const model::ModuleTree& to) {
  const auto module = [&](int m) {
    if (m < 0) return -1;
    const auto found = to.find_module(from.module(m).path);
    return found ? *found : -1;
  };
  const auto param = [&](int p) {
    if (p < 0) return -1;
    const auto found = to.find_parameter(from.parameter(p).name);
    return found ? *found : -1;
  };
  const auto params = [&](const std::vector<int>& in) {
    std::vector<int> out;
    for (int p : in)
      if (const int q = param(p); q >= 0) out.push_back(q);
    std::sort(out.begin(), out.end());
    return out;
  };
  auto out = std::make_shared<ActivationWork>(work);
  for (auto& u : out->units) {
    u.module = module(u.module);
    for (auto* ops : {&u.forward, &u.recompute, &u.backward})
      for (auto& op : *ops) {
        op.module = module(op.module);
        op.param = param(op.param);
      }
  }
  out->float8_params = params(work.float8_params);
  out->lookup_params = params(work.lookup_params);
  return out;
}

std::vector<work::Op> unfused_ops(const work::Op& op, int elem_bytes) {
  if (op.kind != work::OpKind::attention) return {op};
  return work::unfused_attention_ops(op.attention, elem_bytes, op.phase);
}

TokenExchange token_exchange(const work::Op& op) {
  if (op.kind != work::OpKind::ep_collective)
    throw std::logic_error(fmt::format("token_exchange: '{}' is not an EP op", op.name));
  TokenExchange x;
  x.group = op.call.group;
  x.chunk = static_cast<std::size_t>(std::llround(op.call.count));
  switch (static_cast<int>(op.call.elem_bytes)) {
    case 8: x.dtype = comm::DType::f64; break;  // the per-expert token counts (int64)
    case 4: x.dtype = comm::DType::f32; break;
    case 2: x.dtype = comm::DType::bf16; break;
    default:
      throw std::logic_error(
          fmt::format("token_exchange: '{}' moves {}-byte elements", op.name, op.call.elem_bytes));
  }
  return x;
}

TokenExchange token_exchange(const work::Op& op, int ep_size) {
  const TokenExchange x = token_exchange(op);
  if (ep_size != x.group)
    throw std::logic_error(fmt::format("EP op '{}' runs over {} ranks, the EP group has {}",
                                       op.name, x.group, ep_size));
  return x;
}

std::pair<std::int64_t, std::int64_t> token_exchange_per_step(const ActivationWork& work,
                                                              int accum) {
  std::int64_t calls = 0, bytes = 0;
  for (const auto& unit : work.units)
    for (const auto* list : {&unit.forward, &unit.recompute, &unit.backward})
      for (const auto& op : *list)
        if (op.kind == work::OpKind::ep_collective) {
          ++calls;
          bytes += token_exchange(op).bytes_sent();
        }
  return {calls * accum, bytes * accum};
}

namespace {

// Scratch elements (of `elem_bytes`) one unfused op needs.
double scratch_of(const work::Op& u, int elem_bytes) {
  if (u.kind == work::OpKind::ep_collective)  // send and receive side by side
    return 2 * std::ceil(static_cast<double>(token_exchange(u).chunk) * u.call.group *
                         u.call.elem_bytes / elem_bytes);
  if (work::is_collective(u.kind)) return 0;  // TP and CP collectives are not run by the engine
  if (u.kind == work::OpKind::memory)
    return std::ceil(std::max(u.bytes_read, u.bytes_written) / elem_bytes);
  return u.gemm.m * u.gemm.k + u.gemm.k * u.gemm.n + u.gemm.m * u.gemm.n;
}

}  // namespace

double activation_scratch_elems(const ActivationWork& work, int elem_bytes, double max_bytes) {
  double need = 0;
  for (const auto& unit : work.units)
    for (const auto* list : {&unit.forward, &unit.recompute, &unit.backward})
      for (const auto& op : *list)
        for (const auto& u : unfused_ops(op, elem_bytes)) {
          const double n = scratch_of(u, elem_bytes);
          if (n * elem_bytes > max_bytes)
            throw InputError(fmt::format(
                "activation op '{}' needs {:.1f} GiB of scratch (at most {:.0f}): lower "
                "--seq-len or --micro-batch",
                u.name, n * elem_bytes / (1 << 30), max_bytes / (1 << 30)));
          need = std::max(need, n);
        }
  return need;
}

}  // namespace dmuon::engine
