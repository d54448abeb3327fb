#pragma once
// dmuon_inspect's answer for one plan: the hook sites and owners of the shown reshard mode, the
// communication predicted for both modes (each on its own plan: a tied parameter's site
// differs; the mode not shown may have no valid plan, and then says why), the findings, and
// the same as one JSON object.

#include <nlohmann/json.hpp>

#include <array>
#include <optional>
#include <string>

#include "dmuon/engine/step/grad_clip.hpp"
#include "dmuon/engine/step/step_volume.hpp"
#include "dmuon/model/topology.hpp"
#include "dmuon/plan/plan.hpp"
#include "options/run_options.hpp"

namespace dmuon::apps::inspect {

/// What the options ask dmuon_inspect for.
struct InspectArgs {
  const RunOptions* options = nullptr;
  std::string boundary = "default";  ///< resolved against the topology by the plan
  bool strict = true;
  partition::Strategy strategy = partition::Strategy::lpt;
  int world_size = 8;
  std::string layout;
  std::size_t max_rows = 40;
  plan::GradReduce grad_reduce = plan::GradReduce::per_param;
  plan::Reshard shown = plan::Reshard::z3;
  int accum = 1;
  double clip = 0;
  engine::ClipNormType clip_type = engine::ClipNormType::two;
  std::size_t rows() const { return max_rows; }
};

/// The arguments the options (after the tool's rules) give.
InspectArgs inspect_args(const RunOptions& o);

// One reshard mode: its plan and predicted step, or the one-line reason it has none.
struct Mode {
  plan::Reshard reshard = plan::Reshard::z3;
  std::optional<plan::Plan> plan;
  engine::StepVolume volume;
  std::string error;
  bool valid() const { return error.empty(); }
  const char* name() const { return plan::reshard_name(reshard); }
};
using Modes = std::array<Mode, 2>;  // z3, z2

/// Both modes: the shown one's failure is the run's (exit 2); the other's becomes its rows.
Modes resolve_modes(const model::Topology& topo, const InspectArgs& a);
const Mode& shown_mode(const Modes& modes, const InspectArgs& a);

/// Prints the human report (summary, sites, owners, volumes, findings, TP, notes).
void print_report(const model::Topology& topo, const Modes& modes, const plan::CommVolume* ddp,
                  const InspectArgs& a);

/// The --json object.
nlohmann::json inspect_json(const model::Topology& topo, const Modes& modes,
                            const plan::CommVolume* ddp, const InspectArgs& a);

/// ddp-dmuon's predicted volume on the shown mode's sites (no TP form: nullopt with --tp > 1).
std::optional<plan::CommVolume> ddp_volume(const model::Topology& topo, const Mode& shown,
                                           const InspectArgs& a);

}  // namespace dmuon::apps::inspect
