#include "bench/run_list.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "common/plan_setup.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/boundary/degradation.hpp"
#include "dmuon/boundary/repeated_blocks.hpp"

namespace dmuon::apps::bench {
namespace {

std::vector<std::string> warning_lines(const plan::Plan& p) {
  std::vector<std::string> w;
  for (const auto& f : p.report.findings)
    if (f.severity == boundary::Severity::warning)
      w.push_back(fmt::format("WARNING [{}] {}", boundary::finding_kind_name(f.kind), f.message));
  return w;
}

// Per dmuon row whose plan suggests a boundary: the table's row that runs it, or (not swept)
// where it holds. dmuon_project replaces the latter with the suggestion projected at its world
// (project/projection_run.cpp).
void suggest_boundaries(std::vector<BenchRun>& runs, const std::vector<plan::Plan>& plans) {
  for (auto& run : runs) {
    if (run.plan_index < 0) continue;
    const auto& report = plans[static_cast<std::size_t>(run.plan_index)].report;
    const std::string& spec = report.suggested_boundary;
    if (spec.empty()) continue;
    const std::string head =
        fmt::format("suggested boundary: --boundary '{}' ({} hook sites, strict)", spec,
                    report.suggested_sites);
    const auto swept = std::find_if(runs.begin(), runs.end(), [&](const BenchRun& r) {
      return !r.baseline && r.plan_index >= 0 && r.boundary.strict && r.boundary.spec == spec;
    });
    run.suggestion_swept = swept != runs.end();
    run.suggestion =
        swept != runs.end()
            ? fmt::format("{}: the table's row '{}' ({}) runs it", head, swept->boundary.label(),
                          swept->boundary.mode())
            : fmt::format(
                  "{}, not in this sweep: it holds where compute dominates (finer sites overlap "
                  "more communication but send more, smaller messages); dmuon_project --machine "
                  "M projects it at a world size",
                  head);
  }
}

}  // namespace

std::vector<BoundaryChoice> invocation_sweep(const RunOptions& o, const model::Topology& topo,
                                             const std::string& config_dir,
                                             const std::string& config_path, std::string* source) {
  std::string src = "--boundary";
  std::vector<BoundaryChoice> sweep;
  if (o.boundaries.empty()) {
    const auto items = o.model.topology_file.empty()
                           ? default_sweep_items(topo.name, config_dir, &src)
                           : builtin_sweep_items();
    if (!o.model.topology_file.empty()) src = "built-in";
    sweep = resolve_sweep(items, false, topo, true);
  } else {
    if (!config_path.empty()) src = config_path + " / --boundary";
    int repeated = 0;
    sweep = resolve_sweep(o.boundaries, o.lenient, topo, false, &repeated);
    if (repeated > 0)
      src += fmt::format(" ({} repeated item{} run once)", repeated, repeated == 1 ? "" : "s");
  }
  if (source) *source = src;
  return sweep;
}

plan::Plan baseline_plan(const RunOptions& o, const model::Topology& topo, int world,
                         std::string* units) {
  // Sized for the world first: a bad world is the world's error, not --baseline-units'.
  auto config = apps::make_plan_config(o, topo, world, "default", true, o.owner_strategies.front());
  const bool repeated = o.baseline_units == kRepeatedBlocks;
  if (units)
    *units = repeated ? boundary::repeated_blocks_description(topo.tree)
                      : fmt::format("the sites of boundary '{}'", o.baseline_units);
  try {
    if (repeated) {
      config.boundary = boundary::repeated_blocks_spec(topo.tree);
    } else {
      // The --boundary item syntax: an alias, a spec, a strict:/lenient: prefix.
      const auto choice = resolve_sweep({o.baseline_units}, false, topo, false).front();
      config.boundary = choice.spec;
      config.strict = choice.strict;
    }
    return plan::make_plan(topo.tree, config);
  } catch (const InputError& e) {
    throw InputError(fmt::format("--baseline-units '{}': {}", o.baseline_units, e.what()));
  }
}

RunList make_run_list(const RunOptions& o, const model::Topology& topo,
                      const std::vector<BoundaryChoice>& sweep, int world) {
  const auto& methods = o.methods;
  RunList out;
  auto& plans = out.plans;
  auto& runs = out.runs;
  // Owner-based methods (dmuon, ddp-dmuon) depend on the boundary and the owners: a row per
  // sweep row and owner strategy each; the others run once.
  const auto owner_based = [](engine::Method m) {
    return m == engine::Method::dmuon || m == engine::Method::ddp_dmuon;
  };
  std::vector<engine::Method> owner_methods;
  bool want_baselines = false;
  for (auto m : methods) {
    if (owner_based(m) &&
        std::find(owner_methods.begin(), owner_methods.end(), m) == owner_methods.end())
      owner_methods.push_back(m);
    want_baselines = want_baselines || !owner_based(m);
  }
  // dmuon rows: every boundary of the sweep under every owner strategy.
  for (const auto& choice : sweep)
    for (std::size_t strategy = 0; strategy < o.owner_strategies.size(); ++strategy) {
      BenchRun run;
      run.boundary = choice;
      run.config = apps::make_plan_config(o, topo, world, choice.spec, choice.strict,
                                          o.owner_strategies[strategy]);
      try {
        plans.push_back(plan::make_plan(topo.tree, run.config));
        run.plan_index = static_cast<int>(plans.size()) - 1;
        run.warnings = warning_lines(plans.back());
        run.no_suggestion = plans.back().report.no_suggestion;
      } catch (const InputError& e) {
        if (!choice.strict) throw;
        auto lenient = run.config;
        lenient.strict = false;
        try {
          (void)plan::make_plan(topo.tree, lenient);
        } catch (const InputError&) {
          throw e;
        }
        if (strategy > 0) continue;  // rejected for coverage: once per boundary is enough
        run.status = "rejected";
        run.error = e.what();
      }
      for (auto m : owner_methods) {
        run.method = m;
        runs.push_back(run);
      }
    }
  suggest_boundaries(runs, plans);
  if (!want_baselines) return out;
  // The baselines' plan by their own rule, whatever the sweep holds or rejects.
  std::string units;
  plans.push_back(baseline_plan(o, topo, world, &units));
  for (auto m : methods) {
    if (owner_based(m)) continue;
    BenchRun run;
    run.baseline = true;
    run.method = m;
    run.plan_index = static_cast<int>(plans.size()) - 1;
    run.config = plans.back().config;
    run.units = units;
    runs.push_back(std::move(run));
  }
  return out;
}

}  // namespace dmuon::apps::bench
