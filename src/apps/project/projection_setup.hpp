#pragma once
// What a projection needs besides the plan, from the bench options of one invocation: the
// engine options, the step's activation work at the machine's compute type (--seq-len), the
// FLOPs MFU and HFU count under --flops, and the notes the output shows. Shared by
// dmuon_project and dmuon_advise, so the advisor's figures are the projection's.

#include <optional>
#include <string>
#include <vector>

#include "dmuon/model/topology.hpp"
#include "dmuon/plan/plan.hpp"
#include "dmuon/project/machine_model.hpp"
#include "dmuon/project/projection.hpp"
#include "dmuon/work/step_work.hpp"
#include "options/run_options.hpp"

namespace dmuon::apps::project {

/// The TP or CP activation collectives of a step (docs/STEP-WORK.md "Tensor parallelism",
/// "Context parallelism"): its micro-steps' forward, recompute and backward, per rank (the
/// step work's, not audited).
struct ActivationCollectives {
  int size = 1;  ///< T or C
  bool sequence_parallel = false;
  double calls = 0;
  double bytes_per_rank = 0;  ///< sent (= received) on NCCL's rings
};

struct ProjectionSetup {
  dmuon::project::ProjectionOptions options;
  std::optional<work::StepWork> step_work;  ///< nullopt without --seq-len
  std::vector<std::string> notes;           ///< "# note:" lines (what the work leaves out)
  std::string flops_note;                   ///< --flops asked for a geometry the model lacks
  /// --tp and --cp with --seq-len: each group's activation collectives per rank and step, and
  /// what of its activation work is not modelled
  std::vector<std::string> group_notes;
  std::optional<ActivationCollectives> tp_activation;  ///< --tp with --seq-len
  std::optional<ActivationCollectives> cp_activation;  ///< --cp with --seq-len
  std::optional<ActivationCollectives> ep_activation;  ///< --ep with --seq-len
  /// GPU machines: whether compute slows under communication, what the FSDP groups stand for
  std::vector<std::string> machine_notes;
};

/// --cp C on `world` ranks: the shard groups G = world / (R x T) must hold whole CP groups
/// (InputError naming the world that would); nothing to check at C = 1.
void check_cp_world(const RunOptions& o, int world);

/// --cp C > 1 on a CPU machine: InputError (torch's ring attention wraps CUDA kernels only).
void require_cp_machine(int cp, const dmuon::project::Machine& machine);

/// For the options `b` of a projection; sets the step's activation work in b.engine as
/// bench::attach_step_work does. With --tp T > 1, `tp_plan` is a plan of the invocation (its
/// TP-sharded parameters): the work is one TP rank's, split as work::TensorParallel says.
/// `topo`: the whole model, whose activation work runs; `rank_tree`: the tree the plans are
/// made from when it is not topo's (--ep: an EP rank's, load_rank_topology), which the
/// activation work's module and parameter ids are then given in.
ProjectionSetup make_projection_setup(RunOptions& b, const model::Topology& topo,
                                      const dmuon::project::Machine& machine,
                                      dmuon::project::Symmetry symmetry,
                                      const plan::Plan* tp_plan = nullptr,
                                      const model::ModuleTree* rank_tree = nullptr);

}  // namespace dmuon::apps::project
