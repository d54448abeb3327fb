#pragma once
// The activation work of a step (work/step_work.hpp: attention, norms, activations, RoPE,
// residuals, embedding, loss, routing, recompute) as the step schedule places it and the
// backends and the projection run it. The parameters' own GEMMs are not in it: every
// parameter's synthetic Linear runs them (forward, backward: synthetic.hpp); what remains per
// work unit (stem, block, head) is its other forward ops, every op its checkpointing policy
// recomputes before its backward (recomputed linears included), and its other backward ops.
//
// Placement (make_layout): a unit's work runs after the forward compute of its anchor group —
// the last group in forward order holding one of the unit's parameters (the stem: the first
// group, the head: the last) — and in backward, at the same group before its parameters'
// backward: its recompute, then its backward.

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "dmuon/comm/dtype.hpp"
#include "dmuon/engine/step/step_op.hpp"

#include "dmuon/model/module_tree.hpp"
#include "dmuon/work/op.hpp"
#include "dmuon/work/step_work.hpp"

namespace dmuon::engine {

struct ActivationUnit {
  std::vector<work::Op> forward, recompute, backward;
  int module = -1;  ///< the block's module (work::WorkUnit::module); -1 stem / head
  bool head = false;
};

struct ActivationWork {
  std::vector<ActivationUnit> units;  ///< forward order
  /// Parameters whose Linear GEMMs run in fp8 (--compute-dtype fp8: work/float8.hpp), sorted.
  std::vector<int> float8_params;
  /// Parameters the step looks up instead of multiplying (work::StepWork::lookup_params: an
  /// input embedding), sorted: their synthetic Linear does not run (StepSpec::compute_of).
  std::vector<int> lookup_params;
  /// Why the step has no activation work (a model without a geometry), "" otherwise.
  std::string note;
};

/// Whether `op` runs activation work (act_forward, act_recompute, act_backward).
bool is_activation_op(Op op);

/// The ops activation step op `op` runs: its unit's (op.param) forward, recompute or backward
/// list.
const std::vector<work::Op>& unit_ops(const ActivationWork& work, const StepOp& op);

/// The activation work of `work` (see above).
std::shared_ptr<const ActivationWork> activation_work(const work::StepWork& work);

/// `work`, made on tree `from`, in the ids of `to`, a tree with the same module paths and
/// parameter names where both hold them (--ep: the whole model's work on an EP rank's tree,
/// model/expert_local_tree.hpp): modules by path, parameters by name; a parameter `to` does not
/// hold (another rank's expert) leaves the lists, an op naming one or its module keeps -1.
std::shared_ptr<const ActivationWork> in_tree_of(const ActivationWork& work,
                                                 const model::ModuleTree& from,
                                                 const model::ModuleTree& to);

/// A GEMM op of the work model that a parameter's synthetic Linear already runs: a linear of
/// one parameter or a grouped expert GEMM.
bool is_parameter_gemm(const work::Op& op);

/// The ops `op` runs as on a backend without a fused attention kernel (the host, the CUDA
/// backend): an attention core its unfused decomposition (work/attention_ops.hpp: Q·Kᵀ,
/// softmax, P·V and their backward, s×s scores materialized) in elements of `elem_bytes`,
/// anything else itself.
std::vector<work::Op> unfused_ops(const work::Op& op, int elem_bytes);

/// An EP op's all-to-all as the engine runs it over its EP group (CommGroup::ep): `chunk`
/// elements of `dtype` to every member, the work model's balanced share (work::GroupCall:
/// every rank sends each EP rank the same rows) rounded to whole elements.
struct TokenExchange {
  std::size_t chunk = 0;
  comm::DType dtype = comm::DType::f32;
  int group = 1;  ///< E
  /// Bytes this rank sends per call (the counters' all_to_all convention: (E - 1)·chunk).
  std::int64_t bytes_sent() const {
    return static_cast<std::int64_t>(chunk * comm::dtype_size(dtype)) * (group - 1);
  }
};

/// The exchange of an OpKind::ep_collective op; logic_error for another op or an element size
/// no comm::DType has.
TokenExchange token_exchange(const work::Op& op);
/// The same, run by a backend on an EP group of `ep_size` ranks (0: none); logic_error naming
/// the op when that is not the op's group.
TokenExchange token_exchange(const work::Op& op, int ep_size);

/// What the EP ops of `work` move per step with `accum` micro-batches: every unit's forward,
/// recompute and backward once per micro-batch (calls, and bytes sent under the counters'
/// convention) on the EP group's all_to_all channel; zero without them.
std::pair<std::int64_t, std::int64_t> token_exchange_per_step(const ActivationWork& work,
                                                              int accum);

/// Elements of one scratch buffer that holds every unfused op of `work`: a GEMM's three
/// operands side by side, a memory op's larger side, an EP all-to-all's send and receive
/// buffers side by side. InputError naming the op when that is
/// more than `max_bytes` (a run of that shape would not fit: lower --seq-len/--micro-batch).
double activation_scratch_elems(const ActivationWork& work, int elem_bytes, double max_bytes);

}  // namespace dmuon::engine
