#pragma once
// Per-rank device memory of one projected step (docs/MEMORY.md): what a rank holds, term by
// term, read from its step layout (the engine's own decision of what each rank keeps) and the
// step work (activations), and the peak over the step's three phases with the phase it occurs
// in. Bytes throughout; every term is derivable by hand from the parameter shapes:
//
//   masters           4 · master elements: fp32 parameters this rank keeps (DMuon: the pairs
//                     rooted in its column — owned, or HSDP column copies — and its shards of
//                     the non-dedicated unit; FSDP: its shards; DDP: the full model)
//   optimizer_state   4 · (state + second state): Muon momentum / AdamW exp_avg of what it
//                     updates, AdamW exp_avg_sq
//   gradients         persistent gradients in the reduce dtype (--reduce-dtype; default the
//                     wire dtype): rooted pairs (DMuon), gradient
//                     shards (FSDP; plus the full padded gradient of a deferred-reduce group),
//                     full gradients (DDP); --route dtype parameters in their own type
//   ns_input          4 · elements of the Muon parameters it updates: the Nesterov input the
//                     engine keeps per parameter, which Newton–Schulz overwrites
//   weights           gathered / packed weights live at once (StepLayout::live_weight_bytes:
//                     Z3 prefetch + 1 groups, Z2 every group from forward to backward; DDP
//                     computes on its replicas: 0); Z3 on a GPU (StepLayout::stays_gathered)
//                     adds FSDP2's root unit, live from its forward to its backward
//   grad_buffers      backward's travelling gradients (pairs rooted elsewhere, FSDP padded full
//                     gradients) in the grad_window-slot ring, where weights and travelling
//                     gradients (reduce dtype) together peak as the schedule holds them, less
//                     `weights`
//   gather_buffers    fsdp-muon's all-gathered Nesterov inputs (the gather pool)
//   ns_workspace      4 · (4·r·c + 5·m²), m = min(r, c), of the largest matrix it runs
//                     Newton–Schulz on (the host kernel's iterate, successor, input and output
//                     r×c, five m×m products; one matrix at a time)
//   tp_buffers        --tp exchange: send and receive (wire), the fp32 logical matrix
//   activations       what autograd keeps for backward, one micro-batch (activation_memory.hpp)
//   recompute         what backward holds beyond activations and grad_buffers at its peak: a
//                     unit's recomputed tensors and the largest gradient one of its backward
//                     ops writes (ActivationMemory::backward_extra)
//
//
// The reference's DMuon step (StepLayout::reference_memory; the reference's code, read in the
// shared docs' REFERENCE-STEP.md) holds its optimizer otherwise:
//   optimizer_state   Muon momentum in --momentum-dtype (default the gradient's type: a clone
//                     of the reduced gradient), AdamW's two moments fp32
//   ns_input          0: the Nesterov input grad + μ·buf is a temporary (optimizer_transient)
//   ns_workspace      max(8·r·c, 4·r·c + 12·m²) of the largest matrix it owns: G.float() and
//                     its normalised fp32 copy, then the fp16 iterate (twice at the restart,
//                     Q·X) beside six m×m fp16 Gram buffers (R, Z, Q ping-pong, RZ, R_new;
//                     dmuon/optim/newton_schulz.py 371-405); held by the CUDA graphs' pool
//   graph_buffers     per distinct shape it owns, the graph's persistent input and output
//                     (stage_in, update_out) in the gradient's type: 2·g·r·c
//   optimizer_transient  the Nesterov input of its largest matrix (g·r·c) and the clones of
//                     the reduced gradients it owns (_reduced_grad, one group ahead: the
//                     largest two consecutive sites'; --clip-norm's coalesced wait: all), g bytes
//
// Phases: forward end = persistent + weights + activations; backward = that + recompute +
// grad_buffers (its start: every activation still held, the first gradients travelling);
// optimizer = persistent + gather_buffers + ns_workspace (unless the graph pool holds it) +
// optimizer_transient. Persistent = masters + optimizer state + gradients + ns_input +
// tp_buffers + graph_buffers (+ ns_workspace in the graph pool). Peak = the largest phase.

#include <cstdint>
#include <string>
#include <vector>

#include "dmuon/engine/step/step_layout.hpp"
#include "dmuon/project/activation_memory.hpp"

namespace dmuon::project {

enum class MemoryPhase { forward, backward, optimizer };
const char* memory_phase_name(MemoryPhase p);

struct RankMemory {
  int rank = 0;  ///< world rank
  std::int64_t masters = 0, optimizer_state = 0, gradients = 0, ns_input = 0, weights = 0,
               grad_buffers = 0, gather_buffers = 0, ns_workspace = 0, tp_buffers = 0,
               activations = 0, recompute = 0, graph_buffers = 0, optimizer_transient = 0;
  /// The reference's step: Newton–Schulz runs as CUDA graphs captured in one memory pool,
  /// which keeps ns_workspace allocated for the whole run (persistent, not optimizer-only).
  bool graph_pool = false;

  std::int64_t persistent() const {
    return masters + optimizer_state + gradients + ns_input + tp_buffers + graph_buffers +
           (graph_pool ? ns_workspace : 0);
  }
  std::int64_t phase_bytes(MemoryPhase p) const;
  /// The largest phase (the first of equals in forward, backward, optimizer order).
  MemoryPhase peak_phase() const;
  std::int64_t peak() const { return phase_bytes(peak_phase()); }
  /// (name, bytes) of every term, in the order above: the table, JSON and HDF5 names.
  std::vector<std::pair<std::string, std::int64_t>> terms() const;
};

/// InputError naming the largest parameter when a model's sizes would overflow the int64 byte
/// counts of its memory (more than 2^56 elements in all: no real model comes near), checked
/// before any layout sums them; memory_of keeps a nameless backstop.
void require_memory_representable(const model::ModuleTree& tree);

/// The memory of the rank whose layout is `L` (a full layout or a reduced one:
/// reduced_layout.hpp), without activations (add them with with_activations).
RankMemory memory_of(const engine::StepLayout& L);

/// `m` with the activation terms of `a`.
RankMemory with_activations(RankMemory m, const ActivationMemory& a);

/// Bytes the peak exceeds a device of `memory_gb` GB (1e9 bytes) by: > 0 means out of memory;
/// 0 when it fits or when `memory_gb` is 0 (no capacity given).
std::int64_t excess_bytes(const RankMemory& m, double memory_gb);

/// The ranks a world's peak can come from, activations aside: activations are the same on
/// every rank (one micro-batch of the same shape), so the peak rank is the one with the
/// largest backward phase or the one with the largest optimizer phase.
struct MemoryCandidates {
  RankMemory backward, optimizer;
  bool any = false;
  void add(const RankMemory& m);
  /// The peak rank with activations `a` added.
  RankMemory peak(const ActivationMemory& a) const;
};

}  // namespace dmuon::project
