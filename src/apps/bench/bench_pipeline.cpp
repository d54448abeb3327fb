#include "bench/bench_pipeline.hpp"

#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <array>

#include "bench/bench_output.hpp"
#include "dmuon/base/check.hpp"
#include "dmuon/engine/engine.hpp"
#include "dmuon/engine/step/phase.hpp"
#include "dmuon/model/pipeline_stage.hpp"

namespace dmuon::apps::bench {
namespace {

constexpr int kFields = 8;  // StageFigures as doubles

std::array<double, kFields> pack(const BenchRun& run) {
  if (!run.ok()) return {};
  const auto& r = run.result;
  const auto& k =
      r.kinds[engine::channel_index(CommGroup::pipeline, comm::CollectiveKind::send_recv)];
  return {r.phases_ms[static_cast<std::size_t>(engine::Phase::step)],
          static_cast<double>(k.calls_per_step),
          static_cast<double>(k.bytes_measured),
          k.in_flight_ms,
          r.audit_ok ? 1.0 : 0.0,
          r.checked ? 1.0 : 0.0,
          r.check_passed ? 1.0 : 0.0,
          r.max_rel_error};
}

StageFigures unpack(const double* v) {
  StageFigures f;
  f.step_ms = v[0];
  f.calls = v[1];
  f.bytes = v[2];
  f.in_flight_ms = v[3];
  f.audit_ok = v[4] != 0;
  f.checked = v[5] != 0;
  f.check_passed = v[6] != 0;
  f.max_rel_error = v[7];
  return f;
}

}  // namespace

BenchPipeline bench_pipeline(const RunOptions& o, const model::Topology& whole,
                             const work::StepWork& work, int world_rank, int world_size) {
  BenchPipeline p;
  const int stages = o.workload.pp;
  if (stages <= 1) return p;
  p.stage_size = engine::pipeline_stage_size(world_size, stages);
  p.stages.count = stages;
  p.stages.stage = engine::pipeline_stage_of(world_rank, world_size, stages);
  p.stages.runs = o.workload.pp_runs(o.engine.step.accum);
  p.stages.message_elems =
      work.shape.micro_batch * work.shape.seq_len * whole.geometry->stacks.front().hidden;
  for (int s = 0; s < stages; ++s) p.holds.push_back(model::stage_summary(whole, stages, 1, s));
  return p;
}

std::vector<std::vector<StageFigures>> gather_stage_figures(const std::vector<BenchRun>& runs,
                                                            const BenchPipeline& p) {
  int rank = 0, size = 1;
  DMUON_CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  DMUON_CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
  std::vector<double> mine;
  for (const auto& run : runs) {
    const auto v = pack(run);
    mine.insert(mine.end(), v.begin(), v.end());
  }
  const int n = static_cast<int>(mine.size());
  std::vector<double> all(rank == 0 ? static_cast<std::size_t>(n) * size : 0);
  DMUON_CHECK_MPI(
      MPI_Gather(mine.data(), n, MPI_DOUBLE, all.data(), n, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  std::vector<std::vector<StageFigures>> out;
  if (rank != 0) return out;
  out.resize(runs.size());
  for (std::size_t i = 0; i < runs.size(); ++i)
    for (int s = 0; s < p.stages.count; ++s) {
      const std::size_t leader =
          static_cast<std::size_t>(s) * static_cast<std::size_t>(p.stage_size);
      out[i].push_back(unpack(all.data() + leader * static_cast<std::size_t>(n) + i * kFields));
    }
  return out;
}

nlohmann::json pipeline_json(const BenchPipeline& p, const std::vector<BenchRun>& runs,
                             const std::vector<std::vector<StageFigures>>& figures) {
  nlohmann::json j;
  j["stages"] = p.stages.count;
  j["stage_ranks"] = p.stage_size;
  j["schedule"] = "1F1B";
  j["schedule_runs"] = p.stages.runs;
  j["message_bytes"] = p.stages.message_elems * 4;
  j["holds"] = p.holds;
  nlohmann::json rows = nlohmann::json::array();
  for (std::size_t i = 0; i < runs.size() && i < figures.size(); ++i) {
    nlohmann::json row;
    row["method"] = engine::method_name(runs[i].method);
    row["boundary"] = runs[i].boundary_label();
    row["status"] = runs[i].status;
    row["step_ms"] = pipeline_step_ms(figures[i]);
    nlohmann::json stages = nlohmann::json::array();
    for (const auto& f : figures[i])
      stages.push_back({{"step_ms", f.step_ms},
                        {"send_recv_calls", f.calls},
                        {"bytes_sent", f.bytes},
                        {"in_flight_ms", f.in_flight_ms},
                        {"audit_ok", f.audit_ok},
                        {"checked", f.checked},
                        {"check_passed", f.check_passed},
                        {"max_rel_error", f.max_rel_error}});
    row["stages"] = std::move(stages);
    rows.push_back(std::move(row));
  }
  j["rows"] = std::move(rows);
  return j;
}

void fold_stage_failures(std::vector<BenchRun>& runs,
                         const std::vector<std::vector<StageFigures>>& figures) {
  for (std::size_t i = 0; i < runs.size() && i < figures.size(); ++i) {
    if (!runs[i].ok()) continue;
    auto& r = runs[i].result;
    for (std::size_t k = 1; k < figures[i].size(); ++k) {
      const StageFigures& f = figures[i][k];
      if (!f.audit_ok && r.audit_ok) {
        r.audit_ok = false;
        r.audit_message =
            fmt::format("stage {}: its counts differ from the formula (its ranks print which)", k);
      }
      if (f.checked && !f.check_passed && r.check_passed) {
        r.check_passed = false;
        r.max_rel_error = std::max(r.max_rel_error, f.max_rel_error);
        r.worst_param = fmt::format("a parameter of stage {}", k);
      }
    }
  }
}

double pipeline_step_ms(const std::vector<StageFigures>& stages) {
  double most = 0;
  for (const auto& f : stages) most = std::max(most, f.step_ms);
  return most;
}

std::string pipeline_lines(const BenchPipeline& p, const RunOptions& o,
                           const std::vector<BenchRun>& runs,
                           const std::vector<std::vector<StageFigures>>& figures) {
  const auto& st = p.stages;
  std::string s = fmt::format(
      "# pipeline: {} stages of {} rank{} (stage s: world ranks from s x {}; 1F1B, {} "
      "micro-batch{} in {} run{}); each boundary message {} (micro-batch x seq-len x hidden, "
      "fp32, marked with its micro-batch and checked on receipt), sends in flight to the step's "
      "end; the table below is stage 0's\n",
      st.count, p.stage_size, p.stage_size > 1 ? "s" : "", p.stage_size, o.engine.step.accum,
      o.engine.step.accum > 1 ? "es" : "", st.runs, st.runs > 1 ? "s" : "",
      bytes_text(static_cast<double>(st.message_elems) * 4));
  for (std::size_t k = 0; k < p.holds.size(); ++k)
    s += fmt::format("# stage {}: {}\n", k, p.holds[k]);
  for (std::size_t i = 0; i < runs.size() && i < figures.size(); ++i) {
    if (!runs[i].ok()) continue;
    const std::string row = runs[i].baseline
                                ? engine::method_name(runs[i].method)
                                : fmt::format("{} {}", engine::method_name(runs[i].method),
                                              clip(runs[i].boundary_label(), 40));
    int slowest = 0;
    for (std::size_t k = 0; k < figures[i].size(); ++k) {
      const StageFigures& f = figures[i][k];
      if (f.step_ms > figures[i][static_cast<std::size_t>(slowest)].step_ms)
        slowest = static_cast<int>(k);
      s += fmt::format(
          "# stage {}, {}: step {:.2f} ms; {:.0f} boundary sends and receives, {} sent, {:.2f} ms "
          "in them; audit {}; check {}\n",
          k, row, f.step_ms, f.calls, bytes_text(f.bytes), f.in_flight_ms,
          f.audit_ok ? "OK" : "FAILED",
          !f.checked ? "not run"
                     : fmt::format("{} (max rel error {:.2g})", f.check_passed ? "OK" : "FAILED",
                                   f.max_rel_error));
    }
    s += fmt::format("# pipeline step ({}): {:.2f} ms, the slowest stage's (stage {})\n", row,
                     pipeline_step_ms(figures[i]), slowest);
  }
  return s;
}

}  // namespace dmuon::apps::bench
