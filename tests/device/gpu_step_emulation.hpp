#pragma once
// The CUDA engine's run at one rank (the GPU check's setting), emulated on the host with the
// GPU's rounding points, so CI can hold every device-engine-check case to the check's
// tolerance without a GPU. What it mirrors of cuda_backend.cpp, per parameter and step:
//   * weights packed from the fp32 master into the parameter's wire type (--comm-dtype or its
//     --route dtype); synthetic x and target rows drawn in fp32 and stored in that type;
//   * Y = X·Wᵀ, dY = (Y − T)·G/n, dW (+)= dYᵀ·X: fp32 accumulation (the host BLAS), every
//     result rounded to the wire type; --accum micro-batches accumulate into the wire-typed dW;
//   * the reduces at one rank move nothing; --clip-norm scales each wire-typed gradient by the
//     coefficient of their joint norm, rounded back;
//   * Muon: momentum and Nesterov input in fp32 from the wire-typed gradient, the input rounded
//     to --ns-dtype (fsdp-muon: first to the wire type of its all-gather), Newton–Schulz by the
//     CPU emulation of the CUDA kernels (kernels/cuda/standalone/ns_emulation.hpp) with the
//     numerics cuda::ns_numerics picks, the update applied to the fp32 master;
//   * AdamW on the fp32 master from the wire-typed gradient.
// It shares no code with the CUDA backend (only the engine's data generator, optimizer math
// and the kernels' numerics rule), so a backend that rounds elsewhere differs from it.

#include <string>
#include <vector>

#include "dmuon/engine/step/engine_options.hpp"
#include "dmuon/model/module_tree.hpp"
#include "dmuon/plan/plan.hpp"

namespace dmuon::device_check {

struct EmulatedRun {
  /// Final fp32 masters per parameter in tree.parameter_order().
  std::vector<std::vector<float>> weights;
  /// Step 1's Newton–Schulz inputs (as the GPU holds them, in --ns-dtype) of the Muon
  /// parameters, per parameter in parameter_order() (empty for the others).
  std::vector<std::vector<float>> step1_ns_inputs;
};

/// o.total_steps() steps of the one-rank CUDA engine for `o` (device cuda, compute gemm).
EmulatedRun emulate_gpu_run(const model::ModuleTree& tree, const plan::Plan& plan,
                            const engine::EngineOptions& o);

/// Whether parameter `pid` is updated with Muon in a run with these options (else AdamW).
bool runs_muon(const plan::Plan& plan, const engine::EngineOptions& o, int pid);

}  // namespace dmuon::device_check
