#pragma once
// What a projection needs besides the plan, from the bench options of one invocation: the
// engine options, the step's activation work at the machine's compute type (--seq-len), the
// FLOPs MFU and HFU count under --flops, and the notes the output shows. Shared by
// dmuon_project and dmuon_advise, so the advisor's figures are the projection's.

#include <optional>
#include <string>
#include <vector>

#include "dmuon/model/topology.hpp"
#include "dmuon/project/machine_model.hpp"
#include "dmuon/project/projection.hpp"
#include "dmuon/work/step_work.hpp"
#include "options/run_options.hpp"

namespace dmuon::apps::project {

struct ProjectionSetup {
  dmuon::project::ProjectionOptions options;
  std::optional<work::StepWork> step_work;  ///< nullopt without --seq-len
  std::vector<std::string> notes;           ///< "# note:" lines (what the work leaves out)
  std::string flops_note;                   ///< --flops asked for a geometry the model lacks
  std::string tp_note;  ///< --tp with --seq-len: the activation work TP does not split here
  /// GPU machines: whether compute slows under communication, what the FSDP groups stand for
  std::vector<std::string> machine_notes;
};

/// For the options `b` of a projection; sets the step's activation work in b.engine as
/// bench::attach_step_work does.
ProjectionSetup make_projection_setup(RunOptions& b, const model::Topology& topo,
                                      const dmuon::project::Machine& machine,
                                      dmuon::project::Symmetry symmetry);

}  // namespace dmuon::apps::project
