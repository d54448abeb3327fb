#pragma once
// What a DMuon row costs against AdamW, term by term (docs/PROJECTION.md "DMuon against
// AdamW"). The mechanisms of the reference's step are priced as a chain of replays of the same
// DMuon run, each one with a mechanism taken away, so those terms are successive step differences;
// what remains against AdamW is split by the replayed phases. The terms add up to the DMuon step
// less AdamW's:
//
//   X0  the row as projected (its --dmuon-schedule and run model)
//   X1  X0 without a communicator's issue order       communicator_serialisation = X0 − X1
//   X2  X1 with a batch's rooted calls concurrent     broadcast_latency          = X1 − X2
//   X3  X2 without a barrier before each step         barrier_wait               = X2 − X3
//   X4  X3 with Newton–Schulz free                    owners_newton_schulz + publish_wait
//                                                                                = X3 − X4
//   exposed_reduce_tail  X3's time blocked on gradient reductions (backward_comm: the
//                        backward's waits and the optimizer's wait for the reduce tail, max over
//                        ranks) less AdamW's
//   other                X4 − AdamW's step − exposed_reduce_tail: the optimizers' other work,
//                        the collectives' volume, compute
//
// The publish wait is the part of X3 − X4 the next forward spends waiting for the owners'
// optimizer (nothing is published after the step: the broadcast carries the update): the drop
// of the forward's exposed wait (max over ranks) from X3 to X4, at most X3 − X4. A term of a
// mechanism the row does not have is 0 (the replay is the same).

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dmuon/project/projection.hpp"

namespace dmuon::project {

/// The term names in chain order, as the table and the JSON write them.
inline constexpr const char* kCostTerms[] = {"communicator_serialisation",
                                             "broadcast_latency",
                                             "barrier_wait",
                                             "owners_newton_schulz",
                                             "publish_wait",
                                             "exposed_reduce_tail",
                                             "other"};

/// (term, ms) in kCostTerms order; they add up to dmuon's step less adamw's.
std::vector<std::pair<std::string, double>> cost_vs_adamw(
    const model::ModuleTree& tree, const plan::Plan& plan, const Machine& machine,
    const ProjectionOptions& dmuon_options, const Projection& dmuon, const Projection& adamw);

/// DMuon's memory terms less AdamW's, per term (memory_model.hpp names), and the peaks'.
std::vector<std::pair<std::string, std::int64_t>> memory_vs_adamw(const RankMemory& dmuon,
                                                                  const RankMemory& adamw);

}  // namespace dmuon::project
