#pragma once
// The compiled programs of every rank of a modelled world for one run (method, plan,
// options), built from the engine's own layouts and schedules:
//
//   full      make_layout + make_schedule + collectives_of for every rank: the reference the
//             reduced form is tested against; fine up to a few hundred ranks of a small model
//   reduced   rank symmetry: FSDP and DDP ranks share one schedule (their layouts differ only in
//             offsets) and differ only in durations, so ranks with equal sample counts (and,
//             for fsdp-muon, an equally long last shard) share one program; DMuon ranks each
//             get the schedule of their reduced layout (reduced_layout.hpp), O(groups + owned
//             parameters) per rank, with the row collectives of one full reference layout.
//
// Programs are shared between ranks by index and stored as shared chunks (program_store.hpp),
// batch specs are owned here and shared by pointer, so the memory is O(distinct chunks +
// chunk lists + batches of one step).
//
// --tp T (plan.tp.tp > 1, dmuon and fsdp-adamw): T DP groups of R × G ranks on the local shard
// shapes (plan::tp_local_tree), world rank dp · T + t; each rank's schedule holds its TP ops
// (engine/step/step_schedule.hpp). Both forms handle it: the full form builds every (dp, t) layout,
// the reduced form reduces each DP rank once and schedules it for each t (the TP owners'
// Newton–Schulz is what differs); TP batches come from each rank's own layout.

#include <cstdint>
#include <deque>
#include <vector>

#include "dmuon/base/rank_grid.hpp"
#include "dmuon/engine/step/engine_options.hpp"
#include "dmuon/engine/step/step_schedule.hpp"
#include "dmuon/model/module_tree.hpp"
#include "dmuon/plan/plan.hpp"
#include "dmuon/project/memory_model.hpp"
#include "dmuon/project/op_cost.hpp"
#include "dmuon/project/program_store.hpp"
#include "dmuon/project/rank_program.hpp"
#include "dmuon/project/symmetry.hpp"

namespace dmuon::project {

struct WorldPrograms {
  int world = 1;  ///< every rank: grid.world()
  RankGrid grid;  ///< the method's grid (DDP: one row of every rank; engine::method_grid)
  ProgramStore programs;
  std::vector<int> program_of_rank;
  std::deque<BatchSpec> specs;
  /// Full form: every participant's batch is compared with the others' during the replay.
  bool check_batches = false;
  /// How the steps run around the programs (engine::step_run_model of the run): a barrier
  /// before each step, a communicator's batches in issue order, rooted calls of a batch in
  /// series. The default is the barrier-synchronised, concurrent model.
  engine::StepRunModel run_model;
  std::int64_t hook_calls = 0;       ///< hooks that fire, per rank per step
  std::int64_t hook_comm_calls = 0;  ///< of those, hooks that communicate
  std::int64_t groups = 0;           ///< groups of a layout (hook sites + the FSDP unit)
  /// Max over ranks, bytes: weight buffers live at once (Z3: prefetch + 1 groups), fp32
  /// masters, optimizer state (as RunResult reports them).
  std::int64_t peak_packed_bytes = 0, master_bytes = 0, state_bytes = 0;
  /// Device memory per rank (memory_model.hpp) of the ranks the peak can come from.
  MemoryCandidates memory;
};

/// Builds every rank's program. `o.method` selects the method; the plan's partition options
/// give the world (R × G, times plan.tp.tp). `logical_tree` is the model as planned (with
/// --tp, the layouts are made from its local shard shapes here).
WorldPrograms build_programs(const model::ModuleTree& logical_tree, const plan::Plan& plan,
                             const engine::EngineOptions& o, const OpCost& cost, Symmetry symmetry);

}  // namespace dmuon::project
