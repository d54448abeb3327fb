#pragma once
// The work of one micro-batch's forward and backward on one rank, as ops per unit of the model
// (docs/STEP-WORK.md): the stem (embedding lookup), every block of every stack in forward
// order (norms, the attention's projections, RoPE, core and output projection, residual adds,
// the MLP or MoE layer: router, dispatch, experts, combine, shared expert), and the head
// (final norm, logits, cross-entropy). Each unit lists its forward ops, the recompute ops the
// activation-checkpointing policy runs before its backward, and its backward ops, each in
// execution order. A model without a geometry gets its parameters' GEMMs only, and says so.
//
// Expert parallelism is not modelled: every rank runs all experts of its layers on its own
// tokens (StepWork::not_modelled says so for MoE models).

#include <string>
#include <vector>

#include "dmuon/model/topology.hpp"
#include "dmuon/work/op.hpp"
#include "dmuon/work/run_shape.hpp"

namespace dmuon::work {

struct WorkUnit {
  std::string kind;         ///< "stem", "block", "head", or "parameters" (no geometry)
  std::string stack;        ///< the block's stack ("text", "vision", ...); "" otherwise
  int module = -1;          ///< the block's module id; -1 for stem / head / parameters
  std::int64_t index = -1;  ///< the block's position in its stack
  std::vector<Op> forward, recompute, backward;
};

struct StepWork {
  RunShape shape;
  bool has_geometry = false;
  /// Without a geometry: why the step has parameter work only (print it once).
  std::string note;
  double text_tokens = 0;       ///< micro_batch · seq_len
  std::vector<WorkUnit> units;  ///< forward order
  /// What the work model leaves out for this model (print once with MoE / VLA results).
  std::vector<std::string> not_modelled;
  /// Parameters the step looks up, not multiplies: the 2-D weights of Embedding modules that
  /// no GEMM of the work uses (an untied input embedding; a head tied to it multiplies it, so
  /// it is not here), sorted. Their work is the lookup and its backward (the stem's ops), so
  /// the engine runs no Linear for them (engine::StepSpec::compute_of).
  std::vector<int> lookup_params;

  /// Sums of one phase over every unit.
  OpTotals totals(Phase phase) const;
};

/// Whether the step work can split every sequence over `cp` ranks (context parallelism): a
/// model with a geometry whose stacks are all causal text stacks; InputError naming what
/// refuses it otherwise. Nothing to check at cp <= 1.
void check_context_parallel(const model::Topology& topology, int cp);

/// Expert parallelism (ep > 1, RunShape::ep) needs a model with a geometry that has MoE layers;
/// InputError naming the model otherwise. Each layer's experts must split over the EP ranks
/// (build_step_work says which layer does not).
void check_expert_parallel(const model::Topology& topology, int ep);

/// Builds the step's work (InputError for a bad run shape, or a geometry its tree contradicts,
/// e.g. experts of different shapes in one layer).
StepWork build_step_work(const model::Topology& topology, const RunShape& shape);

/// Parameter ids a GEMM op's weights are: its `param`, or for a grouped expert GEMM the
/// `member`-th linear of every expert under its container `module`.
std::vector<int> gemm_params(const model::ModuleTree& tree, const Op& op);

}  // namespace dmuon::work
