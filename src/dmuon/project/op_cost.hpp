#pragma once
// Seconds the compute stream of one rank spends on each compute op of a step schedule
// (pack, forward, backward, prepare, newton_schulz, apply), as the sequence of kernels the
// engine's backend launches for it (engine/exec/cuda_backend.cpp on a GPU machine,
// engine/exec/host_backend.cpp + engine/exec/linear_work.cpp on a CPU machine), each costed by
// ComputeCost. Element sizes: w = the wire type (--comm-dtype: what compute reads on a GPU;
// the host computes in fp32), g = the reduce type (--reduce-dtype, default w: what gradients
// are written, reduced and read in), n = the Newton–Schulz type (GPU: --ns-dtype; CPU: fp32),
// p = the parameters' own type (--param-dtype, fp32 by default: masters and optimizer
// state); a --route dtype replaces w and g for its parameters.
//
//   pack        one conversion per packed pair rooted here / per FSDP shard / DDP replica:
//               (p + w) bytes per element; GPU FSDP groups also FSDP2's copy-out of every
//               gathered parameter (2w bytes per element, at the memory-bound rate)
//   forward     b local samples of a rows×cols weight: draw X (b·cols) [+ T on the host],
//               Y = X·Wᵀ (GEMM b×rows, k = cols)
//   backward    [draw T (b·rows) on a GPU], dY = (Y − T)·G/n (3 passes of b·rows),
//               dX = dY·W (GEMM b×cols, k = rows), dW = dYᵀ·X (GEMM rows×cols, k = b);
//               b = 0: a memset of the gradient (g); sharded padding zeroed (g); GPU FSDP
//               parameters also FSDP2's reduce-scatter copy-in (w + g bytes per element:
//               autograd's gradient read, the reduce-scatter buffer written)
//   prepare     Muon momentum per updated parameter: grad (g) + momentum (2p) + input (n or w)
//   newton_schulz  ComputeCost::newton_schulz (+ a conversion of fsdp-muon's gathered input
//               when the wire and Newton–Schulz types differ); --tp: of the logical matrix
//               (the TP owner's, after its gather); forward, backward, prepare and apply of a
//               TP-sharded parameter work on its local shard (the layout's shapes)
//   apply       Muon: master (2p) + update (n) per element; AdamW: master and two moments
//               read and written (6p) + g per element
//   clip_partial  --clip-norm: one read (g) of every gradient element this rank counts in the
//               norm (engine::clip_counted)
//   clip_scale  every gradient this rank's optimizer consumes (shard or whole) read and written
//               (2g per element), as when the clip is active (coefficient < 1)
//   act_*       the activation work of a unit (engine/step/activation_work.hpp: attention, norms,
//               activations, loss, routing, recompute), each op by OpTime in the compute
//               type (GPU: --compute-dtype, bf16 by default; CPU: fp32)
// --compute-dtype fp8: the GEMMs of forward and backward of every parameter the step work
// marks float8 (work/float8.hpp: torchtitan's Linears but the output head) at the fp8 peak
// (ComputeCost::gemm_fp8); their scaling ops are act_* ops; everything else in bf16.
// --compute none: forward costs nothing and backward draws the synthetic gradient.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "dmuon/engine/step/engine_options.hpp"
#include "dmuon/engine/step/step_layout.hpp"
#include "dmuon/engine/step/step_schedule.hpp"
#include "dmuon/project/compute_cost.hpp"
#include "dmuon/project/op_time.hpp"

namespace dmuon::project {

/// The type GEMMs and activations compute in on `machine`: the step's --compute-dtype, by
/// default bf16 on a GPU (what bf16 training runs, whatever the gradients' wire type) and fp32
/// on a CPU.
kernels::Dtype compute_type(const Machine& machine, const engine::StepSpec& step);

class OpCost {
 public:
  /// `world`: ranks of the projected world (how many share a node's cores: compute_share).
  OpCost(const Machine& machine, const engine::EngineOptions& options, int world);
  ~OpCost();
  OpCost(const OpCost&) = delete;
  OpCost& operator=(const OpCost&) = delete;

  /// The same costs on the GPU with held_sms() SMs held by collectives (compute_contention.hpp);
  /// nullptr when the machine models no such contention.
  const OpCost* held() const { return held_.get(); }
  int held_sms() const { return held_sms_; }

  /// Seconds of a compute op of `layout`'s schedule; `local` is this rank's sample count of
  /// the op's parameter (forward/backward). Non-compute ops cost 0.
  double forward(const engine::ParamLayout& p, std::int64_t local) const;
  double backward(const engine::ParamLayout& p, std::int64_t local) const;
  double pack(const engine::StepLayout& layout, int group) const;
  double prepare(const engine::StepLayout& layout, int group) const;
  double newton_schulz(const engine::ParamLayout& p) const;
  double apply(const engine::ParamLayout& p, int column) const;
  double clip_partial(const engine::StepLayout& layout) const;
  double clip_scale(const engine::StepLayout& layout) const;
  /// act_forward / act_recompute / act_backward of layout's activation work.
  double activation(const engine::StepLayout& layout, const engine::StepOp& op) const;

  /// A counterfactual (cost_vs_adamw.hpp): Newton–Schulz costs nothing from now on.
  void without_newton_schulz() {
    free_ns_ = true;
    if (held_) held_->free_ns_ = true;
  }

  /// The Newton–Schulz and GEMM dtypes this machine runs the options in.
  kernels::Dtype compute_dtype() const { return compute_; }
  kernels::Dtype ns_dtype() const { return ns_; }
  const ComputeCost& cost() const { return cost_; }

 private:
  ComputeCost cost_;
  engine::Compute compute_mode_;  // the step's (--compute gemm|none)
  bool gpu_;
  bool fsdp2_;  // StepSpec::fsdp2: FSDP2's copies
  kernels::Dtype wire_, compute_, ns_;
  OpTime op_time_;    // the activation work's ops
  double w_, g_, n_;  // bytes of the wire, reduce and Newton–Schulz types
  double p_ = 4;      // bytes of the parameters' own type (--param-dtype): masters, state
  /// Bytes per element parameter p's weights travel in: its --route dtype (alt arenas) or the
  /// wire's.
  double wire_bytes(const engine::ParamLayout& p) const {
    return p.alt_wire ? static_cast<double>(kernels::dtype_bytes(p.wire)) : w_;
  }
  /// Bytes per element of p's gradients: its --route dtype or the reduce type.
  double grad_bytes(const engine::ParamLayout& p) const {
    return p.alt_grad ? static_cast<double>(kernels::dtype_bytes(p.grad_wire)) : g_;
  }
  /// --compute-dtype fp8: the parameters whose Linear GEMMs run in fp8 (sorted pids; their
  /// scaling ops are in the activation work), and a Linear's GEMM in fp8 or the compute type.
  std::vector<int> float8_params_;
  bool float8(const engine::ParamLayout& p) const;
  /// The step's activation work: engine::StepSpec::compute_of reads it (none for a parameter
  /// it looks up: its lookup and gradient are activation ops; the engine only fills its
  /// synthetic gradient).
  engine::StepSpec step_;
  engine::Compute compute_of(const engine::ParamLayout& p) const { return step_.compute_of(p.pid); }
  double linear_gemm(std::int64_t m, std::int64_t n, std::int64_t k, bool fp8) const;
  /// FSDP2's per-gather copy-out and per-reduce copy-in of a sharded parameter on a GPU.
  double fsdp2_copy_out(const engine::ParamLayout& p) const;
  double fsdp2_copy_in(const engine::ParamLayout& p) const;
  struct Twin {};
  OpCost(const Machine& machine, const engine::EngineOptions& options, int world, Twin);
  int held_sms_ = 0;
  bool free_ns_ = false;  // without_newton_schulz()
  std::unique_ptr<Machine> held_machine_;
  std::unique_ptr<OpCost> held_;
  kernels::NsConfig ns_config_;
  mutable std::mutex ns_mutex_;  // the projection asks from several threads (world_programs)
  mutable std::map<std::pair<std::int64_t, std::int64_t>, double> ns_cache_;
};

}  // namespace dmuon::project
