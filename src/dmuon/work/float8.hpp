#pragma once
// torchtitan's float8 training (--compute-dtype fp8): torchao's Float8Linear with tensorwise
// dynamic scaling, the recipe of torchtitan's float8 runs of Dec 2024 (PUBLIC-THROUGHPUT.md
// §2c: "+ compile + Float8"). Sources, read for this model:
//
//   torchtitan  torchtitan/float8.py, Float8Handler.convert_to_float8_training:
//               convert_to_float8_training(model, config=..., module_filter_fn=lambda mod, fqn:
//               fqn != "output") — every nn.Linear but the output head; later versions name it
//               `filter_fqns` (default ["output"]). Attention (SDPA), norms and the loss stay bf16.
//   torchao     torchao/float8/float8_linear.py, Float8Linear.forward: the input and the weight
//               cast by hp_tensor_to_float8_dynamic (float8_scaling_utils.py: tensor_to_scale ->
//               tensor_to_amax = max(abs(x)), one reduction reading x; then x * scale cast to
//               e4m3, reading x and writing 1 byte per element); manual_float8_matmul_with_args_
//               in_float8 saves input_fp8 and weight_fp8_t; the grad output cast to e5m2 in
//               backward (NoopFwToFloat8E5M2BwDynamic: amax, then cast); backward: grad_input =
//               mm(grad_output_fp8, weight_fp8_t.t()), grad_weight = mm(grad_output_fp8.t(),
//               input_fp8). torchao/float8/float8_ops.py, preprocess_addmm: torch._scaled_mm
//               takes a row-major first and a column-major second operand, so `a` not row-major
//               is copied (a.contiguous()) and `b` row-major is copied (b.t().contiguous().t()):
//               grad_input copies the fp8 weight, grad_weight the fp8 grad output and input.
//
// Per Linear (T tokens, in = K, out = N, high-precision element e bytes, fp8 1 byte):
//
//   forward   float8.amax (input)    reads T·K·e           float8.cast (input)   T·K·e → T·K
//             float8.amax (weight)   reads N·K·e           float8.cast (weight)  N·K·e → N·K
//             the GEMM in fp8 (2·T·N·K FLOPs)
//   backward  float8.amax (grad out) reads T·N·e           float8.cast (grad out) T·N·e → T·N
//             float8.transpose (weight, for dgrad)   N·K → N·K
//             float8.transpose (grad out, for wgrad) T·N → T·N
//             float8.transpose (input, for wgrad)    T·K → T·K
//             dgrad and wgrad GEMMs in fp8
//
// One kernel each (torch.compile fuses each cast's multiply, clamp and conversion; an amax
// needs the whole tensor before its cast, so they stay two kernels). Not modelled: compile
// fusing an amax into the op that produced its input, FSDP's float8 all-gather
// (enable_fsdp_float8_all_gather, off by default), rowwise scaling, fp8 grouped expert GEMMs.

#include <cstdint>
#include <vector>

#include "dmuon/model/topology.hpp"
#include "dmuon/work/op.hpp"

namespace dmuon::work {

/// The scaling ops of one float8 Linear: `forward` what runs before its forward GEMM, and
/// `backward` what runs before its dgrad GEMM (the grad output's cast and the weight's
/// transpose) followed by what runs before its wgrad GEMM (the two transposes), in that order.
OpPair float8_scaling_ops(double tokens, std::int64_t in, std::int64_t out, double e);

/// Turns a unit's Linear GEMMs to float8 (Op::float8) except the module `excluded` (the
/// output head; -1 for none) and grouped expert GEMMs, and inserts each one's scaling ops
/// (module set, param -1) before its GEMMs in the unit's forward and backward lists.
void apply_float8(std::vector<Op>& forward, std::vector<Op>& backward, int excluded, double e);

}  // namespace dmuon::work
