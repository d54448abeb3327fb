#include "dmuon/work/gemm_ops.hpp"

namespace dmuon::work {
namespace {

Op gemm_op(const char* name, Phase phase, double m, double n, double k, double batch, double read,
           double written) {
  Op op;
  op.name = name;
  op.kind = OpKind::gemm;
  op.phase = phase;
  op.gemm = {m, n, k, static_cast<std::int64_t>(batch)};
  op.flops = 2 * m * n * k * batch;
  op.bytes_read = read;
  op.bytes_written = written;
  op.kernels = 1;
  return op;
}

}  // namespace

OpPair linear_ops(double tokens, std::int64_t in_features, std::int64_t out_features,
                  std::int64_t batch, bool bias, double e) {
  const double t = tokens, in = static_cast<double>(in_features),
               out = static_cast<double>(out_features), b = static_cast<double>(batch);
  OpPair p;
  // Forward with the bias added in the GEMM's epilogue (addmm).
  p.forward.push_back(gemm_op("linear", Phase::forward, t, out, in, b,
                              b * (t * in + out * in + (bias ? out : 0)) * e, b * t * out * e));
  // Its weight gradient reads the input X (the weight is a parameter, not an activation).
  p.forward.back().saved_bytes = b * t * in * e;
  p.backward.push_back(gemm_op("linear.dgrad", Phase::backward, t, in, out, b,
                               b * (t * out + out * in) * e, b * t * in * e));
  p.backward.push_back(gemm_op("linear.wgrad", Phase::backward, out, in, t, b,
                               b * (t * out + t * in) * e, b * out * in * e));
  if (bias) {
    Op db = memory_op("linear.bias_grad", b * t * out * e, b * out * e, b * t * out, 1);
    db.phase = Phase::backward;
    p.backward.push_back(db);
  }
  return p;
}

}  // namespace dmuon::work
