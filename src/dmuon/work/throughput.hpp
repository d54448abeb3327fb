#pragma once
// Throughput the way the field reports it: model TFLOP/s per GPU, MFU (model FLOPs under a
// convention, flop_convention.hpp, over the peak) and HFU (the FLOPs the hardware ran:
// activation recompute counted, as Korthikanti et al. 2022 and Megatron-LM define it; a
// kernel's internal recompute, FlashAttention's backward, is not).

#include "dmuon/work/step_work.hpp"
#include "kernels/dtype.hpp"

namespace dmuon::work {

/// flops_per_token · tokens/s per GPU / 1e12.
double model_tflops_per_gpu(double flops_per_token, double tokens_per_s_per_gpu);

/// Model FLOP/s per GPU over `peak_flops` (FLOP/s); InputError unless peak_flops > 0.
double mfu(double flops_per_token, double tokens_per_s_per_gpu, double peak_flops);

/// Matmul FLOPs per text token the step runs: forward, backward and recompute (under TP, of
/// the T ranks that share the tokens).
double hardware_flops_per_token(const StepWork& w);

/// HFU of a step's work at `tokens_per_s_per_gpu`.
double hfu(const StepWork& w, double tokens_per_s_per_gpu, double peak_flops);

}  // namespace dmuon::work
