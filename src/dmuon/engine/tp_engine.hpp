#pragma once
// The engine under tensor parallelism, layout R x G x T (docs/METRICS.md "Tensor
// parallelism"; world rank = dp * T + t). Host only, method dmuon; --comm-dtype fp32 or bf16
// (bf16: the DP collectives as without TP, the TP gather in bf16, the scatter fp32).
//
// Every rank holds the local shards of the TP-sharded parameters (tp_local_tree: the model
// with their local shapes) and the other parameters whole. The world splits into T DP groups
// (the R x G ranks with the same t; the whole DMuon step runs in each, unchanged, on the local
// shapes: broadcasts, reduces, HSDP stages) and R x G TP groups (the T ranks with the same dp).
// On a DP owner, a TP-sharded parameter's Newton–Schulz is a TP exchange, explicit in the step
// schedule (step_schedule.hpp: tp_gather, newton_schulz on the TP owner, tp_scatter; run by
// tp_exchange.hpp): gather of the shards to the TP owner, Newton–Schulz on the full logical
// matrix, scatter of the fp32 update; each shard holder applies its part with the logical
// matrix's Muon scale. --accum K: the DP step's K micro-steps as without TP (accumulation.hpp);
// the TP exchange, part of the optimizer, once per step after the last micro-step's reduces.
//
// Synthetic data: each TP shard is its own synthetic Linear of the local shape, keyed by
// (parameter, TP rank) (tp_shard_key). The --check reference (tp_reference_weights) runs the
// same shards in one process, with Newton–Schulz on the assembled logical matrices.

#include <mpi.h>

#include <vector>

#include "dmuon/engine/engine_options.hpp"
#include "dmuon/engine/run_result.hpp"
#include "dmuon/model/module_tree.hpp"
#include "dmuon/plan/plan.hpp"

namespace dmuon::engine {

/// The model as one TP rank holds it: every TP-sharded parameter with its local shape.
model::ModuleTree tp_local_tree(const model::ModuleTree& tree, const plan::Plan& plan);

/// One line (InputError) for what the TP engine does not run; nothing when plan.tp.tp == 1.
void validate_tp_run(const plan::Plan& plan, const EngineOptions& o);

/// Collective over `world` (R x G x T ranks). Every rank gets the audit and check verdicts of
/// the whole world; see RunResult for what the other fields describe.
RunResult run_tp_engine(const model::ModuleTree& tree, const plan::Plan& plan,
                        const EngineOptions& o, MPI_Comm world);

/// One-process reference of a TP run: final weights of TP rank `tp_rank`, per parameter of
/// tp_local_tree in parameter_order() (a TP-sharded parameter: that rank's shard). `dp_size`
/// is R x G (the global batch is o.global_samples(dp_size)).
std::vector<std::vector<float>> tp_reference_weights(const model::ModuleTree& tree,
                                                     const plan::Plan& plan, const EngineOptions& o,
                                                     int dp_size, int tp_rank);

}  // namespace dmuon::engine
