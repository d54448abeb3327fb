#pragma once
// Predicted per-step communication of the dedicated (Muon) parameters under `--method
// ddp-dmuon`: DMuon's owners on a DDP world (every rank holds the full replica). Per step, over
// all N ranks as one group:
//   reduce(avg) of each dedicated gradient to its owner (one per parameter, or one per
//   (site, owner) packed buffer with GradReduce::packed), in the wire type;
//   after the owner's Newton–Schulz and update, one broadcast per (site, owner) pair of the
//   owner's updated fp32 master, rooted at the owner.
// Under the counter convention of comm/collective_counters.hpp (reduce: sent by non-roots;
// broadcast: received by non-roots), with M the dedicated elements and m_r those rank r owns:
//   reduce     calls D (parameters) or P (pairs); bytes e·(M − m_r)
//   broadcast  calls P;                           bytes 4·(M − m_r)
// so with an fp32 wire 8·(M − m_r) = 2·(P_M − own_r) bytes, 2(N−1)/N·P_M for balanced owners.
// The non-dedicated parameters all-reduce as in DDP (baseline_volume.hpp).

#include "dmuon/boundary/hook_plan.hpp"
#include "dmuon/model/module_tree.hpp"
#include "dmuon/partition/partition.hpp"
#include "dmuon/plan/comm_volume.hpp"

namespace dmuon::plan {

/// `broadcast` is the post-step broadcast, `reduce` the gradient reduce; the HSDP kinds stay
/// zero (ddp-dmuon runs over all G·R ranks as one group, owners are world ranks). The hook
/// counts are zero: DDP has no DMuon hook sites. Gradients travel in `wire_bytes` per element
/// when > 0, else in each parameter's dtype, or their --route dtype (`route_wire_bytes`, one
/// more packed buffer per (site, owner) for each such type, as predict_dmuon_volume); the
/// broadcast carries the fp32 master. Checked:
/// an overflow is an InputError naming the parameter or rank.
CommVolume predict_ddp_dmuon_volume(const model::ModuleTree& tree, const boundary::HookPlan& plan,
                                    const partition::Partition& part,
                                    GradReduce grad_reduce = GradReduce::per_param,
                                    int wire_bytes = 0,
                                    const std::vector<int>* route_wire_bytes = nullptr);

}  // namespace dmuon::plan
