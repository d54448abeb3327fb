#include "dmuon/work/op.hpp"

#include <cmath>

#include "dmuon/comm/bus_bandwidth.hpp"

namespace dmuon::work {

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::forward: return "forward";
    case Phase::backward: return "backward";
    case Phase::recompute: return "recompute";
  }
  return "?";
}

const char* op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::gemm: return "gemm";
    case OpKind::attention: return "attention";
    case OpKind::batched_gemm: return "batched_gemm";
    case OpKind::memory: return "memory";
    case OpKind::tp_collective: return "tp_collective";
    case OpKind::cp_collective: return "cp_collective";
    case OpKind::ep_collective: return "ep_collective";
  }
  return "?";
}

double GroupCall::bytes_per_rank() const {
  return comm::busbw_factor(kind, group) * comm::message_bytes(kind, std::llround(count),
                                                               static_cast<std::size_t>(elem_bytes),
                                                               group);
}

namespace {

Op collective_op(const char* name, OpKind kind, const GroupCall& call) {
  Op op;
  op.name = name;
  op.kind = kind;
  op.kernels = 1;
  op.call = call;
  return op;
}

}  // namespace

Op tp_collective_op(const char* name, comm::CollectiveKind kind, double count, double elem_bytes,
                    int group) {
  return collective_op(name, OpKind::tp_collective, {kind, count, elem_bytes, group});
}

Op cp_collective_op(const char* name, const GroupCall& call) {
  return collective_op(name, OpKind::cp_collective, call);
}

Op ep_collective_op(const char* name, const GroupCall& call) {
  return collective_op(name, OpKind::ep_collective, call);
}

OpPair tp_region_input(int group, bool sequence, double n, double e, bool partial_gradient) {
  using comm::CollectiveKind;
  OpPair p;
  if (sequence)
    p.forward.push_back(
        tp_collective_op("tp_all_gather", CollectiveKind::all_gather, n / group, e, group));
  if (partial_gradient)
    p.backward.push_back(
        sequence ? tp_collective_op("tp_reduce_scatter", CollectiveKind::reduce_scatter, n / group,
                                    e, group)
                 : tp_collective_op("tp_all_reduce", CollectiveKind::all_reduce, n, e, group));
  return p;
}

OpPair tp_region_output(int group, bool sequence, double n, double e) {
  using comm::CollectiveKind;
  if (!sequence)
    return {{tp_collective_op("tp_all_reduce", CollectiveKind::all_reduce, n, e, group)}, {}};
  return {
      {tp_collective_op("tp_reduce_scatter", CollectiveKind::reduce_scatter, n / group, e, group)},
      {tp_collective_op("tp_all_gather", CollectiveKind::all_gather, n / group, e, group)}};
}

double AttentionShape::scores() const {
  const double s = static_cast<double>(seq);
  return static_cast<double>(batch) * static_cast<double>(heads) * s * s * score_fraction() /
         static_cast<double>(context_parallel);
}

double AttentionShape::local_tokens() const {
  return static_cast<double>(batch) * static_cast<double>(seq) /
         static_cast<double>(context_parallel);
}

Op memory_op(const char* name, double bytes_read, double bytes_written, double vector_flops,
             int kernels) {
  Op op;
  op.name = name;
  op.kind = OpKind::memory;
  op.bytes_read = bytes_read;
  op.bytes_written = bytes_written;
  op.vector_flops = vector_flops;
  op.kernels = kernels;
  return op;
}

void OpTotals::add(const Op& op) {
  flops += op.flops;
  vector_flops += op.vector_flops;
  bytes += op.bytes();
  kernels += op.kernels;
  ++ops;
}

void OpTotals::add(const std::vector<Op>& list) {
  for (const auto& op : list) add(op);
}

}  // namespace dmuon::work
