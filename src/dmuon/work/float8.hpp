#pragma once
// torchtitan's float8 training (--compute-dtype fp8): torchao's Float8Linear with tensorwise
// dynamic scaling, the recipe of torchtitan's float8 runs of Dec 2024 (PUBLIC-THROUGHPUT.md
// §2c: "+ compile + Float8"). Sources, read for this model at the commits that benchmark names
// (benchmarks/llama3_h100_202412_torchtitan.md: torchtitan 9dec370, torchao eab345c):
//
//   torchtitan  torchtitan/float8.py, Float8Handler.convert_to_float8_training:
//               convert_to_float8_training(model, config=..., module_filter_fn=lambda mod, fqn:
//               fqn != "output") — every nn.Linear but the output head; the scaling types
//               default "dynamic" (config_manager.py), and only tensorwise exists at 9dec370.
//               Later versions name the filter `filter_fqns` (the option's default is empty;
//               the train configs set ["output"]) and skip Linears with a dim not divisible by
//               16. Attention (SDPA), norms and the loss stay bf16.
//               torchtitan/parallelisms/parallelize_llama.py, _save_list: per-op SAC saves
//               aten.abs and aten.max ("for low precision training, it's useful to always save
//               the result of max(abs(tensor))"): under --ac selective an amax is not
//               recomputed, the casts are (step_work.cpp, recompute_ops).
//   torchao     torchao/float8/float8_linear.py, Float8Linear.forward: the input and the weight
//               cast by hp_tensor_to_float8_dynamic (float8_scaling_utils.py: tensor_to_scale ->
//               tensor_to_amax = max(abs(x)), one reduction reading x; then x * scale cast to
//               e4m3, reading x and writing 1 byte per element); manual_float8_matmul_with_args_
//               in_float8 saves input_fp8 and weight_fp8_t; the grad output cast to e5m2 in
//               backward (NoopFwToFloat8BwDynamic: amax, then cast); backward: grad_input =
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
// Under tensor parallelism (torchtitan's float8 TP plan; torchao/float8/float8_tensor_parallel
// .py): PrepareFloat8ModuleInput casts a region's input (the attention's, the MLP's) before it
// redistributes it, so under sequence parallelism the rank's shard is cast and the all-gather
// moves fp8, once for every column-parallel Float8Linear reading it (Float8ColwiseParallel and
// Float8Linear skip an input already cast); Float8RowwiseParallel casts its local input. The
// cast of a DTensor (a TP shard, a weight shard) takes the amax of the whole tensor: an
// all-reduce of one fp32 over the TP group after each amax (torchao's tensor_to_amax with
// reduce_amax), forward and for each grad output in backward.
//
// One kernel each (torch.compile fuses each cast's multiply, clamp and conversion; an amax
// needs the whole tensor before its cast, so they stay two kernels). Not modelled: compile
// fusing an amax into the op that produced its input or a transpose into its cast, FSDP's
// float8 all-gather (enable_fsdp_float8_all_gather: off by default at 9dec370, though its
// docs/float8.md launches with it; the benchmark does not say), fp8 grouped expert GEMMs, and
// rowwise scaling: torchao's "all_axiswise" recipe (config.py; torchtitan's default "rowwise"
// later) runs manual_float8_matmul_with_args_in_hp, which saves the bf16 input and weight and
// casts from them six times per Linear (input and weight for the forward GEMM, grad output and
// weight for dgrad, grad output and input for wgrad: an amax along one axis and a cast each,
// no fp8 transposes) into CUTLASS's rowwise _scaled_mm, whose rate no public sweep here gives.

#include <cstdint>
#include <vector>

#include "dmuon/model/topology.hpp"
#include "dmuon/work/op.hpp"
#include "dmuon/work/run_shape.hpp"

namespace dmuon::work {

/// The name of a float8 amax op (saved, not recomputed, by torchtitan's per-op SAC).
inline constexpr const char* kFloat8Amax = "float8.amax";

/// The scaling ops of one float8 Linear: `forward` what runs before its forward GEMM, and
/// `backward` what runs before its dgrad GEMM (the grad output's cast and the weight's
/// transpose) followed by what runs before its wgrad GEMM (the two transposes), in that order.
OpPair float8_scaling_ops(double tokens, std::int64_t in, std::int64_t out, double e);

/// Turns a unit's Linear GEMMs to float8 (Op::float8) except the module `excluded` (the
/// output head; -1 for none) and grouped expert GEMMs, and inserts each one's scaling ops
/// (module set, param -1) before its GEMMs in the unit's forward and backward lists. Under
/// `tp` (size > 1) as torchtitan's float8 TP plan (above): a TP region's input is cast once
/// for its column-parallel Linears, before its sequence all-gather (which then carries fp8)
/// or, without SP, before the first of them; and every cast of a TP-sharded tensor all-reduces
/// its amax over the group (a one-element fp32 tp_collective, "float8.amax_all_reduce").
void apply_float8(std::vector<Op>& forward, std::vector<Op>& backward, int excluded, double e,
                  const TensorParallel& tp = {});

}  // namespace dmuon::work
