#include "dmuon/work/op.hpp"

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
  }
  return "?";
}

const char* tp_collective_name(TpCollectiveKind k) {
  switch (k) {
    case TpCollectiveKind::all_reduce: return "all_reduce";
    case TpCollectiveKind::all_gather: return "all_gather";
    case TpCollectiveKind::reduce_scatter: return "reduce_scatter";
  }
  return "?";
}

double TpCall::bytes_per_rank() const {
  const double n = group, share = (n - 1) / n;
  if (kind == TpCollectiveKind::all_reduce) return 2 * share * count * elem_bytes;
  return share * n * count * elem_bytes;
}

Op tp_collective_op(const char* name, TpCollectiveKind kind, double count, double elem_bytes,
                    int group) {
  Op op;
  op.name = name;
  op.kind = OpKind::tp_collective;
  op.kernels = 1;
  op.tp = {kind, count, elem_bytes, group};
  return op;
}

double AttentionShape::scores() const {
  const double s = static_cast<double>(seq);
  return static_cast<double>(batch) * static_cast<double>(heads) * s * s * score_fraction();
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
