#include "advise/scale_advice.hpp"

#include <fmt/format.h>

#include "advise/evaluator.hpp"
#include "common/config_dir.hpp"
#include "common/run_machine.hpp"
#include "dmuon/project/machine_model.hpp"

namespace dmuon::apps::advise {
namespace {

std::string figures(const Outcome& out) {
  if (out.status == Status::rejected) return "rejected: " + out.error;
  const double gb = static_cast<double>(out.peak_bytes) / 1e9;
  if (out.status == Status::oom) return fmt::format("out of memory ({:.1f} GB)", gb);
  return fmt::format("{:.2f} ms ({} {:.2f} ms), {:.1f} GB", out.step_ms, out.dominant_phase,
                     out.dominant_ms, gb);
}

}  // namespace

ScaleAdvice scale_advice(const model::Topology& topo, const RunOptions& o, const plan::Plan& p,
                         int world) {
  ScaleAdvice a;
  const std::string& suggested = p.report.suggested_boundary;
  if (suggested.empty()) return a;
  if (o.projection.machine.empty()) {
    a.line =
        "# the suggestion holds where compute dominates (finer sites overlap more communication "
        "but send more, smaller messages): give --machine M to project it at this world size\n";
    return a;
  }
  const auto machine = load_run_machine(o);
  RunOptions row = o;
  row.methods = {engine::Method::dmuon};
  Evaluator ev(row, topo, machine, world, machine.memory_gb);
  const auto current = candidate_of(row, p.config.boundary);
  const auto proposed = current.with(knob("boundary"), suggested);
  const auto& now = ev.evaluate(current);
  const auto& then = ev.evaluate(proposed);
  a.projected = true;
  const bool both_run = now.status == Status::ok && then.status == Status::ok;
  a.slower = then.status != Status::ok || (both_run && then.step_ms > now.step_ms);
  std::string verdict;
  if (both_run)
    verdict = then.step_ms <= now.step_ms
                  ? fmt::format("{:.2f}x faster", now.step_ms / then.step_ms)
                  : fmt::format("{:.2f}x slower: not an improvement at this scale",
                                then.step_ms / now.step_ms);
  else if (then.status != Status::ok)
    verdict = "it does not run: not an improvement at this scale";
  else
    verdict = "the current boundary does not run; the suggestion does";
  a.line = fmt::format(
      "# projected at {} ranks on {}: suggested '{}' {} against the current '{}' {}: {}\n", world,
      machine.name, suggested, figures(then), p.config.boundary, figures(now), verdict);
  return a;
}

}  // namespace dmuon::apps::advise
