#include "project/pipeline_run.hpp"

#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "bench/bench_output.hpp"
#include "common/plan_setup.hpp"
#include "common/run_main.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/engine/step/phase.hpp"
#include "dmuon/model/pipeline_stage.hpp"
#include "dmuon/project/collective_cost.hpp"
#include "dmuon/project/pipeline_schedule.hpp"
#include "dmuon/work/flop_convention.hpp"
#include "project/projection_output.hpp"
#include "project/projection_run.hpp"

namespace dmuon::apps::project {
namespace {

using engine::Phase;

// One pipeline rank's model, options (its world: world / P) and projected rows.
struct Stage {
  std::string holds;  // model::stage_summary
  double in_flight = 1;
  std::unique_ptr<RunOptions> o;
  std::unique_ptr<Invocation> v;
};

// One row of the sweep as the pipeline runs it.
struct PipelineRow {
  int world = 0;
  const bench::BenchRun* run = nullptr;  // stage 0's (method, boundary, owners)
  std::string status = "ok", error;
  dm::PipelineTime time;
  double send_ms = 0;  // one boundary send
  double tokens_per_s = 0, mfu = 0, hfu = 0, tflops = 0;
  int peak_stage = 0;
  const dm::RankMemory* memory = nullptr;  // the peak stage's
  std::vector<dm::StageTime> stages;       // each alone (ok rows); waits: time.bubble_ms
  std::vector<double> stage_peak_gb;
};

double phase(const dm::Projection& p, Phase ph) {
  return p.result.phases_ms[static_cast<std::size_t>(ph)];
}

// One micro-batch's activations (or their gradients) across a stage boundary: micro-batch x
// sequence x hidden in the compute type (each TP rank its 1/T of the sequence under sequence
// parallelism), one send, priced as a 2-rank all-to-all's chunk (a send to one peer); over the
// network when the world spans NVLink domains (the worst boundary).
double send_ms(const Invocation& v, const model::Topology& whole, int world) {
  const auto& shape = v.setup.step_work->shape;
  const double e = shape.element_bytes();
  const double elements = static_cast<double>(shape.micro_batch) *
                          static_cast<double>(shape.seq_len) *
                          static_cast<double>(whole.geometry->stacks.front().hidden) /
                          (shape.tp.sequence ? shape.tp.size : 1);
  const int domains = v.machine.domain_of(world - 1) > 0 ? 2 : 1;
  return dm::collective_time(v.machine, comm::CollectiveKind::all_to_all,
                             static_cast<std::int64_t>(elements), static_cast<std::size_t>(e),
                             dm::CommSpan{2, domains})
             .total_s() *
         1e3;
}

std::vector<Stage> project_stages(RunOptions& o, const model::Topology& whole,
                                  const std::string& config_path, const dm::PipelineShape& shape) {
  std::vector<Stage> stages;
  for (int p = 0; p < shape.stages; ++p) {
    Stage s;
    s.holds = model::stage_summary(whole, shape.stages, shape.chunks, p);
    s.in_flight = dm::in_flight(shape, p);
    s.o = std::make_unique<RunOptions>(o);
    for (int& w : s.o->projection.world_sizes) w /= shape.stages;
    s.v = std::make_unique<Invocation>(*s.o,
                                       model::pipeline_stage(whole, shape.stages, shape.chunks, p));
    prepare(*s.v, config_path);
    // The schedule keeps this many micro-batches' saved activations at the stage's peak.
    auto& a = s.v->setup.options.activations;
    a.saved = static_cast<std::int64_t>(static_cast<double>(a.saved) * s.in_flight);
    project_each_row(*s.v);
    stages.push_back(std::move(s));
  }
  return stages;
}

// The stages' rows must be the same rows (they are unless a boundary sweeps differently on
// the stages' trees).
void require_aligned(const std::vector<Stage>& stages, std::size_t wi) {
  const auto& first = stages.front().v->worlds[wi].list.runs;
  for (const auto& s : stages) {
    const auto& runs = s.v->worlds[wi].list.runs;
    bool same = runs.size() == first.size();
    for (std::size_t i = 0; same && i < runs.size(); ++i)
      same = runs[i].method == first[i].method &&
             runs[i].boundary_label() == first[i].boundary_label() &&
             runs[i].config.partition.strategy == first[i].config.partition.strategy;
    if (!same)
      throw InputError(
          "--pp: the stages' sweeps differ (a boundary gives other rows on another stage's "
          "blocks); project one --boundary, --method and --owner-strategy at a time");
  }
}

PipelineRow compose(const std::vector<Stage>& stages, std::size_t wi, std::size_t i,
                    const dm::PipelineShape& shape, double send) {
  PipelineRow r;
  const int P = shape.stages;
  r.world = stages.front().v->worlds[wi].world * P;
  r.run = &stages.front().v->worlds[wi].list.runs[i];
  for (int p = 0; p < P; ++p) {
    const auto& w = stages[static_cast<std::size_t>(p)].v->worlds[wi];
    const auto& run = w.list.runs[i];
    if (!run.ok() && r.status == "ok") {
      r.status = run.status;
      r.error = fmt::format("stage {}: {}", p, run.error);
    }
    if (run.ok() || oom(run)) {
      const auto& mem = w.projections[i].memory;
      if (!r.memory || mem.peak() > r.memory->peak()) {
        r.memory = &mem;
        r.peak_stage = p;
      }
    }
    if (!run.ok()) continue;
    const auto& pr = w.projections[i];
    r.stages.push_back({phase(pr, Phase::step),
                        phase(pr, Phase::forward_compute) + phase(pr, Phase::backward_compute)});
    r.stage_peak_gb.push_back(static_cast<double>(pr.memory.peak()) / 1e9);
  }
  if (r.status != "ok") return r;
  r.time = dm::pipeline_time(shape, r.stages, send);
  r.send_ms = send;
  const double step = r.time.step_ms;
  for (int p = 0; p < P; ++p) {
    const auto& pr = stages[static_cast<std::size_t>(p)].v->worlds[wi].projections[i];
    const double alone = r.stages[static_cast<std::size_t>(p)].step_ms;
    // Each stage's figures scaled from its own step to the pipeline's: the tokens are the
    // same (every micro-batch passes every stage), the FLOPs and ranks add up.
    if (p == 0) r.tokens_per_s = pr.tokens_per_s * alone / step;
    r.mfu += pr.mfu * alone / (P * step);
    r.hfu += pr.hfu * alone / (P * step);
    r.tflops += pr.model_tflops_per_gpu * alone / (P * step);
  }
  return r;
}

std::string schedule_name(const dm::PipelineShape& s) {
  return s.chunks == 1 ? "1F1B" : fmt::format("interleaved 1F1B, {} chunks per rank", s.chunks);
}

std::string table(const std::vector<Stage>& stages, const std::vector<PipelineRow>& rows,
                  const dm::PipelineShape& shape) {
  std::string s = fmt::format(
      "# pipeline: --pp {} ({}), {} micro-batches (--accum) through the stages{}; each stage "
      "projected as its own world of world/{} ranks, the step composed (docs/PROJECTION.md "
      "\"Pipeline parallelism\")\n",
      shape.stages, schedule_name(shape), shape.micro_batches,
      shape.runs > 1 ? fmt::format(" in {} runs of {}, each filling and draining", shape.runs,
                                   shape.run_micro_batches())
                     : "",
      shape.stages);
  for (std::size_t p = 0; p < stages.size(); ++p)
    s += fmt::format("#   stage {}: {} (the activations of {:g} micro-batches in flight)\n", p,
                     stages[p].holds, stages[p].in_flight);
  s += fmt::format("{:>8} {:<10} {:<28} {:>6} {:>11} {:>7} {:>10} {:>8} {:>9} {:>6}\n", "world",
                   "method", "boundary", "owners", "step ms", "MFU %", "tok/s/GPU", "mem GB",
                   "bubble %", "stage");
  for (const auto& r : rows) {
    const std::string label = bench::clip(r.run->boundary_label(), 28);
    const double gb = r.memory ? static_cast<double>(r.memory->peak()) / 1e9 : 0;
    if (r.status != "ok") {
      s += fmt::format("{:>8} {:<10} {:<28} {:>6} {}: {}\n", r.world,
                       engine::method_name(r.run->method), label, r.run->owner_label(), r.status,
                       r.error);
      continue;
    }
    const double bubble = r.time.bubble_ms[static_cast<std::size_t>(r.time.critical)];
    s += fmt::format(
        "{:>8} {:<10} {:<28} {:>6} {:>11.2f} {:>7.2f} {:>10.5g} {:>8.1f} {:>9.1f} {:>6}\n", r.world,
        engine::method_name(r.run->method), label, r.run->owner_label(), r.time.step_ms,
        100 * r.mfu, r.tokens_per_s / r.world, gb, 100 * bubble / r.time.step_ms, r.time.critical);
    for (std::size_t p = 0; p < r.stages.size(); ++p)
      s += fmt::format(
          "#   stage {}: alone {:.2f} ms, compute {:.2f} ms a micro-batch, bubble {:.2f} ms, "
          "peak {:.1f} GB\n",
          p, r.stages[p].step_ms, r.stages[p].compute_ms / shape.micro_batches, r.time.bubble_ms[p],
          r.stage_peak_gb[p]);
    s += fmt::format(
        "#   span {:.2f} ms, with {} boundary sends of {:.3f} ms on its fill{} and drain{}\n",
        r.time.span_ms, 2 * (shape.stages * shape.chunks - 1) * shape.runs, r.send_ms,
        shape.runs > 1 ? "s" : "", shape.runs > 1 ? "s" : "");
  }
  return s;
}

nlohmann::json to_json(const std::vector<Stage>& stages, const std::vector<PipelineRow>& rows,
                       const dm::PipelineShape& shape, const RunOptions& o) {
  nlohmann::json j;
  auto& pj = j["pipeline"];
  pj = {{"stages", shape.stages},
        {"chunks_per_rank", shape.chunks},
        {"micro_batches", shape.micro_batches},
        {"schedule_runs", shape.runs},
        {"schedule", shape.chunks == 1 ? "1f1b" : "interleaved-1f1b"}};
  for (const auto& s : stages) pj["holds"].push_back(s.holds);
  j["runs"] = nlohmann::json::array();
  for (const auto& r : rows) {
    nlohmann::json x = {{"world_size", r.world},
                        {"method", engine::method_name(r.run->method)},
                        {"boundary", r.run->boundary_label()},
                        {"owner_strategy", r.run->owner_label()},
                        {"status", r.status}};
    const auto& machine = stages.front().v->machine;
    if (r.memory) x["memory"] = memory_json(*r.memory, machine, true);
    if (r.status != "ok") {
      x["error"] = r.error;
      j["runs"].push_back(x);
      continue;
    }
    x["step_ms"] = r.time.step_ms;
    x["tokens_per_s"] = r.tokens_per_s;
    x["mfu"] = r.mfu;
    x["hfu"] = r.hfu;
    x["model_tflops_per_gpu"] = r.tflops;
    x["flop_convention"] = work::flop_convention_name(o.workload.flops);
    x["critical_stage"] = r.time.critical;
    x["span_ms"] = r.time.span_ms;
    x["send_ms"] = r.send_ms;
    x["peak_stage"] = r.peak_stage;
    for (std::size_t p = 0; p < r.stages.size(); ++p)
      x["stages"].push_back({{"stage", p},
                             {"holds", stages[p].holds},
                             {"in_flight", stages[p].in_flight},
                             {"step_alone_ms", r.stages[p].step_ms},
                             {"compute_ms", r.stages[p].compute_ms},
                             {"bubble_ms", r.time.bubble_ms[p]},
                             {"peak_GB", r.stage_peak_gb[p]}});
    j["runs"].push_back(x);
  }
  return j;
}

}  // namespace

int run_pipeline_projection(RunOptions& o, const std::string& config_path) {
  const int accum = o.engine.step.accum;
  const dm::PipelineShape shape{o.workload.pp, o.workload.pp_chunks, accum,
                                o.workload.pp_runs(accum)};
  for (int w : o.projection.world_sizes)
    if (w % shape.stages != 0)
      throw InputError(fmt::format(
          "--pp {}: world size {} does not split into {} stages (valid: a multiple of {})",
          shape.stages, w, shape.stages, shape.stages));
  const model::Topology whole = load_topology(o.model);
  auto stages = project_stages(o, whole, config_path, shape);
  std::vector<PipelineRow> rows;
  int failures = 0;
  for (std::size_t wi = 0; wi < o.projection.world_sizes.size(); ++wi) {
    require_aligned(stages, wi);
    const double send = send_ms(*stages.front().v, whole, o.projection.world_sizes[wi]);
    for (std::size_t i = 0; i < stages.front().v->worlds[wi].list.runs.size(); ++i) {
      rows.push_back(compose(stages, wi, i, shape, send));
      failures += rows.back().status == "rejected";
    }
  }
  if (o.json)
    std::cout << to_json(stages, rows, shape, o).dump(2) << std::endl;
  else
    std::cout << table(stages, rows, shape) << std::flush;
  return failures == 0 ? kOk : kCheckFailed;
}

}  // namespace dmuon::apps::project
