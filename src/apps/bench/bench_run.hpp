#pragma once
// One row of a dmuon_bench invocation: a (boundary, method) run that was measured, or a
// boundary rejected at set-up. Baselines (methods other than dmuon) do not depend on the
// boundary and run once per invocation, as their own rows.

#include <string>
#include <vector>

#include "bench/sweep.hpp"
#include "dmuon/engine/step/run_result.hpp"
#include "dmuon/partition/partition.hpp"
#include "dmuon/plan/plan.hpp"

namespace dmuon::apps::bench {

struct BenchRun {
  bool baseline = false;
  BoundaryChoice boundary;  ///< the sweep row (unused for baselines)
  engine::Method method = engine::Method::dmuon;
  std::string status = "ok";          ///< "ok" | "rejected" | "oom" (dmuon_project)
  std::string error;                  ///< the set-up error of a rejected row (full text)
  plan::PlanConfig config;            ///< the plan configuration (also for rejected rows)
  int plan_index = -1;                ///< into the invocation's plans; -1 when rejected
  engine::RunResult result;           ///< valid when status == "ok"
  std::vector<std::string> warnings;  ///< degradation warnings of the row's plan, one line each
  std::string no_suggestion;  ///< warnings and no boundary suggestion: why, and what to change
  /// The detector's suggested boundary for this row's warnings and what it gives: the table's
  /// row where the sweep holds it; dmuon_project: projected at the row's world; dmuon_bench
  /// otherwise: where it holds. "" without a suggestion.
  std::string suggestion;
  bool suggestion_swept = false;  ///< a row of the same invocation runs the suggestion
  std::string units;              ///< baselines: what their FSDP units are (--baseline-units)
  /// dmuon_project, an oom row: the memory-saving changes that fit, with their figures.
  std::vector<std::string> remedies;

  bool ok() const { return status == "ok"; }
  std::string boundary_label() const { return baseline ? "-" : boundary.label(); }
  std::string mode() const { return baseline ? "-" : boundary.mode(); }
  /// The owner strategy of a dmuon row ("-" for baselines, which own nothing).
  std::string owner_label() const {
    return baseline ? "-" : partition::strategy_name(config.partition.strategy);
  }
};

}  // namespace dmuon::apps::bench
