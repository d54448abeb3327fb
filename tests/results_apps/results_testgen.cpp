// results_testgen: makes results files for the results tests and the shipped reference file.
//
//   results_testgen reference OUT.h5 [--world N]
//       moe/tiny at world N (default 8): the default, recommended (strict), incomplete (strict,
//       rejected at set-up) and incomplete (lenient) boundaries with REAL plans (sites, owners,
//       partition, predicted collectives) and SYNTHETIC timings derived deterministically from
//       the plan (summary attribute timings_source = "synthetic-example").
//   results_testgen mutate IN.h5 OUT.h5 collective|owner|slower=F|nan|sgemm=F|samples=N
//       a copy of IN with one deterministic quantity changed (run 0's first broadcast count on
//       rank 0 +1, or the owner of run 0's first dedicated parameter moved), every ok run's
//       timings (per-sample phases, step times and timing summaries) multiplied by F, one
//       NaN step time in the first ok run, the machine probe (provenance sgemm_gflops)
//       multiplied by F (a busier or calmer machine at start), or every ok run's timings cut
//       to their first N samples.

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "dmuon/base/error.hpp"
#include "dmuon/engine/step/engine_options.hpp"
#include "dmuon/engine/step/step_volume.hpp"
#include "dmuon/model/topology.hpp"
#include "dmuon/plan/comm_volume.hpp"
#include "dmuon/plan/plan.hpp"
#include "dmuon/results/plan_record.hpp"
#include "dmuon/results/provenance.hpp"
#include "dmuon/results/results_reader.hpp"
#include "dmuon/results/results_writer.hpp"
#include "dmuon/results/summary.hpp"

namespace {

using namespace dmuon;
using namespace dmuon::results;

constexpr std::int64_t kTokens = 256;  // per rank per step
constexpr std::int64_t kSteps = 12;

// Deterministic jitter in [-2 %, +2 %].
double jitter(std::uint64_t& state) {
  state = state * 6364136223846793005ULL + 1442695040888963407ULL;
  return 1.0 + 0.04 * (static_cast<double>(state >> 11) / 9007199254740992.0 - 0.5);
}

void add_synthetic_measurements(const model::Topology& topo, const plan::Plan& p,
                                const plan::CommVolume& v, RunRecord& r) {
  const auto world = r.world_size;
  // A simple, clearly artificial cost model: compute per token, ~10 GB/s links, optimizer
  // time proportional to the owner's partition cost load.
  r.timings.phases = {"forward", "backward", "optimizer"};
  r.timings.steps = kSteps;
  r.timings.ranks = world;
  std::uint64_t state = 42;
  for (std::int64_t s = 0; s < kSteps; ++s)
    for (std::int64_t rank = 0; rank < world; ++rank) {
      const auto i = static_cast<std::size_t>(rank);
      const double bcast = static_cast<double>(v.broadcast.bytes_per_rank[i]) / 1e10;
      const double red = static_cast<double>(v.reduce.bytes_per_rank[i]) / 1e10;
      // 20 us latency per collective call, so coarser hook sites are visibly cheaper.
      const double bcalls = 1e-5 * static_cast<double>(v.broadcast.calls_per_rank[i]);
      const double rcalls = 2e-5 * static_cast<double>(v.reduce.calls_per_rank[i]);
      const double fwd = 2e-3 + 0.5 * bcast + bcalls;
      const double bwd = 4e-3 + 0.5 * bcast + red + bcalls + rcalls;
      const double opt = 1e-4 + 2e-5 * static_cast<double>(p.partition.cost_loads.at(i));
      double step = 0;
      for (double t : {fwd, bwd, opt}) {
        r.timings.seconds.push_back(t * jitter(state));
        step += r.timings.seconds.back();
      }
      r.timings.step_seconds.push_back(step * 1.01);  // the loop's own overhead on top
    }
  r.collectives.bytes_per_rank_per_step = r.collectives.formula_bytes_per_rank_per_step;

  for (const auto& [k, val] : timing_medians(r.timings)) r.summary[k] = val;
  const double step_s = r.summary["step_ms"] / 1e3;
  const double opt_s = r.summary["optimizer_ms"] / 1e3;
  double ns_flops = 0, updated = 0;
  for (int pid : p.hooks.dedicated) {
    const auto& shape = topo.tree.parameter(pid).shape;
    const double rows = static_cast<double>(shape.at(0));
    double cols = 1;
    for (std::size_t d = 1; d < shape.size(); ++d) cols *= static_cast<double>(shape[d]);
    const double m = std::min(rows, cols), n = std::max(rows, cols);
    ns_flops += 5 * (4 * m * m * n + 2 * m * m * m);  // 5 NS steps (SPEC §7)
    updated += rows * cols;
  }
  r.summary["exposed_comm_ms"] = 0.3 * r.summary["forward_ms"];
  r.summary["tokens_per_s"] = static_cast<double>(kTokens * world) / step_s;
  r.summary["ns_tflops"] = ns_flops / opt_s / 1e12;
  r.summary["updated_params_per_s"] = updated / step_s;
  r.summary["check_passed"] = 1;
  r.summary["max_rel_error"] = 0;
  r.summary_text["timings_source"] = "synthetic-example";
  r.summary_text["check"] = "not run (synthetic example)";
  std::int64_t owned = 0, site_max = 0;
  for (auto b : v.owned_bytes) owned = std::max(owned, b);
  for (auto b : r.sites.bytes) site_max = std::max(site_max, b);
  r.memory["master_bytes_max"] = owned;
  r.memory["momentum_bytes_max"] = owned;
  r.memory["packed_buffer_bytes_max"] = site_max;
}

// The engine options dmuon_bench runs by default, as its records carry them (so the synthetic
// files pair with real ones in dmuon_compare and plot_results.py).
void set_engine_defaults(RunRecord& r) {
  const engine::EngineOptions d;
  r.prefetch = d.step.prefetch;
  r.device = engine::device_name(d.backend.device);
  r.comm_dtype = engine::dtype_flag_name(d.step.wire);
  r.ns = std::string(kernels::to_string(d.backend.ns));
  r.ns_dtype = "fp32";  // the host computes Newton-Schulz in fp32
  r.optimizer_pipeline = engine::optimizer_pipeline_name(d.step.pipeline);
}

int reference(const std::string& out, int world, int argc, char** argv) {
  const auto topo = model::build_topology("moe", "tiny");
  struct Choice {
    const char* word;
    std::string spec;
    bool strict;
  };
  const std::vector<Choice> choices = {{"default", "default", true},
                                       {"recommended", topo.recommended_boundary, true},
                                       {"incomplete", topo.incomplete_boundary, true},
                                       {"incomplete", topo.incomplete_boundary, false}};
  ResultsFile f;
  f.provenance = collect_provenance(argc, argv, world, 1);
  for (const auto& ch : choices) {
    plan::PlanConfig c;
    c.dedicate_rule = topo.dedicate_rule;
    c.boundary = ch.spec;
    c.strict = ch.strict;
    c.partition.shard = world;
    const std::string config = fmt::format(
        "topology: moe\npreset: tiny\nboundary: {{spec: {}, strict: {}}}\nowner_strategy: lpt\n"
        "cost_model: optimizer\nmethod: [dmuon]\nreshard: z3\ntokens: {}\nsteps: {}\n",
        ch.word, ch.strict ? "true" : "false", kTokens, kSteps);
    try {
      const auto p = plan::make_plan(topo.tree, c);
      const auto v = engine::predict_step_volume(topo.tree, p, {}).owners;
      auto r = make_plan_record(topo, p, v, "dmuon");
      set_engine_defaults(r);
      r.boundary_label = fmt::format("{} ({})", ch.word, ch.strict ? "strict" : "lenient");
      r.config_text = config;
      r.global_samples = kTokens * world;
      r.steps = kSteps;
      r.warmup = 1;
      r.seed = 1;
      r.prefetch = 1;  // dmuon_bench's default, so its files and these plot together
      add_synthetic_measurements(topo, p, v, r);
      f.runs.push_back(std::move(r));
    } catch (const InputError& e) {
      auto r = make_rejected_record(topo, c, e.what(), "dmuon", plan::Reshard::z3);
      r.boundary_label = fmt::format("{} ({})", ch.word, ch.strict ? "strict" : "lenient");
      r.config_text = config;
      r.global_samples = kTokens * world;
      r.steps = kSteps;
      r.warmup = 1;
      r.seed = 1;
      r.prefetch = 1;
      f.runs.push_back(std::move(r));
    }
  }
  write_results(out, f);
  return 0;
}

int mutate(const std::string& in, const std::string& out, const std::string& what) {
  auto f = read_results(in);
  if (f.runs.empty()) throw InputError("no runs to mutate");
  auto& r0 = f.runs[0];
  if (what == "collective") {
    r0.collectives.calls_per_step.at(0) += 1;
  } else if (what == "owner") {
    for (std::size_t i = 0; i < r0.params.name.size(); ++i)
      if (r0.params.dedicated[i]) {
        r0.params.owner_rank[i] = (r0.params.owner_rank[i] + 1) % r0.world_size;
        break;
      }
  } else if (what.rfind("slower=", 0) == 0) {
    const double factor = std::stod(what.substr(7));
    for (auto& r : f.runs) {
      if (r.status != "ok") continue;
      for (auto& s : r.timings.seconds) s *= factor;
      for (auto& s : r.timings.step_seconds) s *= factor;
      for (const auto& [k, v] : timing_medians(r.timings)) r.summary[k] = v;
    }
  } else if (what.rfind("sgemm=", 0) == 0) {
    f.provenance.sgemm_gflops *= std::stod(what.substr(6));
  } else if (what.rfind("samples=", 0) == 0) {
    const auto n = std::stoll(what.substr(8));
    for (auto& r : f.runs) {
      auto& t = r.timings;
      if (r.status != "ok" || n <= 0 || n > t.steps) continue;
      const auto per_step = static_cast<std::size_t>(t.ranks);
      t.steps = n;
      t.repeats = 1;
      t.seconds.resize(static_cast<std::size_t>(n) * per_step * t.phases.size());
      if (!t.step_seconds.empty()) t.step_seconds.resize(static_cast<std::size_t>(n) * per_step);
      for (const auto& [k, v] : timing_medians(t)) r.summary[k] = v;
    }
  } else if (what == "nan") {
    for (auto& r : f.runs) {
      if (r.status != "ok" || r.timings.step_seconds.empty()) continue;
      r.timings.step_seconds[r.timings.step_seconds.size() / 2] = std::nan("");
      break;
    }
  } else {
    throw InputError(
        fmt::format("unknown mutation '{}' (valid: collective, owner, slower=F, nan, sgemm=F, "
                    "samples=N)",
                    what));
  }
  write_results(out, f);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::vector<std::string> a(argv + 1, argv + argc);
    if (a.size() >= 2 && a[0] == "reference") {
      int world = 8;
      if (a.size() == 4 && a[2] == "--world") world = std::stoi(a[3]);
      return reference(a[1], world, argc, argv);
    }
    if (a.size() == 4 && a[0] == "mutate") return mutate(a[1], a[2], a[3]);
    fmt::print(stderr,
               "usage: results_testgen reference OUT.h5 [--world N] | mutate IN OUT "
               "collective|owner|slower=F|nan|sgemm=F|samples=N\n");
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "results_testgen: error: {}\n", e.what());
    return 2;
  }
}
