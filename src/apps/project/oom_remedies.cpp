#include "project/oom_remedies.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "advise/candidate.hpp"
#include "advise/evaluator.hpp"

namespace dmuon::apps::project {
namespace {

// The memory-saving value of each knob that is not at it already: --ep E (the largest that
// divides the world and every layer's experts, without --replicate or --tp: advise::ep_values),
// --ac full (with a step work), --comm-dtype bf16, --reshard z3.
std::vector<std::pair<std::size_t, std::string>> savings(const RunOptions& o,
                                                         const advise::Candidate& start,
                                                         const model::Topology& whole, int world,
                                                         int nvlink_domain) {
  std::vector<std::pair<std::size_t, std::string>> out;
  const auto add = [&](const char* key, const std::string& value) {
    if (start.value(key) != value) out.emplace_back(advise::knob(key), value);
  };
  if (o.plan.partition.replicate == 1 && o.plan.tp == 1)
    add("ep", advise::ep_values(whole.tree, world, nvlink_domain).back());
  if (o.workload.seq_len > 0) add("ac", "full");
  add("comm_dtype", "bf16");
  add("reshard", "z3");
  return out;
}

}  // namespace

std::vector<std::string> oom_remedies(const RunOptions& o, const model::Topology& topo,
                                      const model::Topology& whole,
                                      const dmuon::project::Machine& machine, int world,
                                      const bench::BenchRun& run) {
  RunOptions row = o;
  row.methods = {run.method};
  row.owner_strategies = {run.config.partition.strategy};
  const std::string boundary = run.baseline ? std::string("default") : run.boundary.spec;
  const auto start = advise::candidate_of(row, boundary);
  const auto changes = savings(o, start, whole, world, machine.nvlink_domain);
  std::vector<advise::Candidate> tries;
  for (const auto& [k, v] : changes) tries.push_back(start.with(k, v));
  if (changes.size() > 1) {
    auto all = start;
    for (const auto& [k, v] : changes) all = all.with(k, v);
    tries.push_back(all);
  }
  advise::Evaluator ev(row, topo, machine, world, machine.memory_gb, &whole);
  std::vector<std::pair<double, std::string>> fits;
  std::string all_text;  // what all the changes together still need, when even that is oom
  for (const auto& c : tries) {
    const auto& out = ev.evaluate(c, run.method);
    const double gb = static_cast<double>(out.peak_bytes) / 1e9;
    if (out.status == advise::Status::oom)
      all_text = fmt::format("{} still needs {:.1f} GB", advise::changed_flags(c, start), gb);
    if (out.status != advise::Status::ok) continue;
    fits.emplace_back(out.step_ms, fmt::format("fits with {}: {:.1f} ms, {:.1f} GB",
                                               advise::changed_flags(c, start), out.step_ms, gb));
  }
  std::sort(fits.begin(), fits.end());
  std::vector<std::string> lines;
  for (auto& f : fits) lines.push_back(std::move(f.second));
  // What is left beyond these knobs; context parallelism splits long sequences' activations.
  const std::string more =
      o.workload.seq_len > 0 && o.workload.cp == 1
          ? "more ranks, --tp, --cp (activations of long sequences), or dmuon_advise"
          : "more ranks, --tp, or dmuon_advise";
  if (lines.empty() && !tries.empty())
    lines.push_back(all_text.empty()
                        ? fmt::format("no memory-saving change fits: {}", more)
                        : fmt::format("no memory-saving change fits ({}): {}", all_text, more));
  if (tries.empty())
    lines.push_back(fmt::format(
        "no memory-saving knob left to change (--ac full, --comm-dtype bf16 and --reshard z3 "
        "already): {}",
        more));
  return lines;
}

}  // namespace dmuon::apps::project
