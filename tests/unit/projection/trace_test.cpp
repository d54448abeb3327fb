// The replay's timeline (--trace) against the engine's own schedules: on small topologies,
// every issue op of each rank's schedule appears once per replayed step on that rank's stream
// track, with the payload its collectives_of() calls carry; no span is negative and spans on
// one track never overlap; the JSON is what Perfetto reads (traceEvents, X spans in µs).

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "dmuon/base/error.hpp"
#include "dmuon/comm/dtype.hpp"
#include "dmuon/engine/step/step_schedule.hpp"
#include "dmuon/project/projection.hpp"
#include "test_machines.hpp"
#include "test_plan_options.hpp"

namespace {

using namespace dmuon;
using engine::Method;

struct Built {
  model::Topology topo;
  plan::Plan plan;
};

Built build(const std::string& topology, int world, int replicate) {
  test::PlanOptions po;
  po.topology = topology;
  po.replicate = replicate;
  Built b{test::load_topology(po), {}};
  b.plan = plan::make_plan(b.topo.tree, test::make_plan_config(po, b.topo, world));
  return b;
}

// (name, payload bytes) of every issue op of rank r's schedule, sorted.
std::vector<std::pair<std::string, std::int64_t>> expected_batches(const Built& b,
                                                                   const engine::StepSpec& spec,
                                                                   int r) {
  std::vector<std::pair<std::string, std::int64_t>> out;
  const auto layout = engine::make_layout(b.topo.tree, b.plan, spec, r);
  for (const auto& op : engine::make_schedule(layout, spec)) {
    if (!engine::is_issue(op.op)) continue;
    std::int64_t bytes = 0;
    for (const auto& c : engine::collectives_of(layout, op, spec))
      bytes += c.count * static_cast<std::int64_t>(comm::dtype_size(c.dtype));
    out.emplace_back(std::string(engine::op_name(op.op)) + " g" + std::to_string(op.group), bytes);
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(ReplayTrace, EveryIssueOncePerStepWithItsBytesAndNoOverlap) {
  struct Case {
    const char* topology;
    int world, replicate;
    Method method;
    plan::Reshard reshard;
  };
  const Case cases[] = {{"llm", 4, 1, Method::dmuon, plan::Reshard::z3},
                        {"moe", 8, 2, Method::dmuon, plan::Reshard::z2},
                        {"vla", 4, 1, Method::fsdp_adamw, plan::Reshard::z3},
                        {"nested", 4, 1, Method::ddp_dmuon, plan::Reshard::z3}};
  const auto machine = project::testing::nccl_machine(4, 100, 10);
  for (const auto& c : cases) {
    const std::string what = std::string(c.topology) + " " + engine::method_name(c.method);
    const Built b = build(c.topology, c.world, c.replicate);
    project::ProjectionOptions po;
    po.engine.step.method = c.method;
    po.engine.step.reshard = c.reshard;
    po.engine.step.tokens = 7;
    po.engine.run.warmup = 1;  // two replayed steps
    std::vector<int> ranks;
    for (int r = 0; r < c.world; ++r) ranks.push_back(r);
    Trace trace(ranks, c.world, "projected");
    po.trace = &trace;
    (void)project::project(b.topo.tree, b.plan, machine, po);
    const auto doc = nlohmann::json::parse(trace.json(what));
    // Per (rank, step): the batches seen on the stream tracks; per (rank, track): the spans.
    std::map<std::pair<int, int>, std::vector<std::pair<std::string, std::int64_t>>> seen;
    std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> tracks;
    int phases = 0;
    for (const auto& e : doc.at("traceEvents")) {
      if (e.at("ph") != "X") continue;
      const int pid = e.at("pid"), tid = e.at("tid");
      const double ts = e.at("ts"), dur = e.at("dur");
      EXPECT_GE(dur, 0.0) << what;
      EXPECT_GE(ts, 0.0) << what;
      tracks[{pid, tid}].emplace_back(ts, dur);
      if (tid == static_cast<int>(TraceTrack::phases)) ++phases;
      if (tid >= static_cast<int>(TraceTrack::weights)) {
        const auto& a = e.at("args");
        EXPECT_GT(a.at("payload_bytes").get<std::int64_t>(), 0) << what;
        seen[{pid, a.at("step").get<int>()}].emplace_back(
            e.at("name"), a.at("payload_bytes").get<std::int64_t>());
      }
    }
    EXPECT_GT(phases, 0) << what;
    // The step as the projection runs it: on a GPU its FSDP groups are FSDP2's (the root
    // unit gathered once under Z3).
    engine::StepSpec as_run = po.engine.step;
    as_run.fsdp2 = machine.device == project::DeviceKind::gpu;
    for (int r = 0; r < c.world; ++r) {
      const auto expect = expected_batches(b, as_run, r);
      EXPECT_FALSE(expect.empty()) << what;
      for (int step = 1; step <= 2; ++step) {
        auto got = seen[{r, step}];
        std::sort(got.begin(), got.end());
        EXPECT_EQ(got, expect) << what << " rank " << r << " step " << step;
      }
    }
    for (auto& [key, spans] : tracks) {
      std::sort(spans.begin(), spans.end());
      for (std::size_t i = 1; i < spans.size(); ++i)
        EXPECT_GE(spans[i].first, spans[i - 1].first + spans[i - 1].second - 1e-6)
            << what << " rank " << key.first << " track " << key.second;
    }
  }
}

TEST(ReplayTrace, ARankOutsideTheWorldIsBadInput) {
  EXPECT_THROW(Trace({0, 4}, 4, "projected"), InputError);
  EXPECT_THROW(Trace({-1}, 4, "projected"), InputError);
  const Trace t({3, 1, 3}, 4, "projected");
  EXPECT_EQ(t.ranks(), (std::vector<int>{1, 3}));
  EXPECT_TRUE(t.traced(3));
  EXPECT_FALSE(t.traced(0));
}

}  // namespace

namespace {

using namespace dmuon;

// One span of a parsed trace: its rank (pid), track (tid), step, name and [start, end] in µs.
struct Span {
  int rank, track, step;
  std::string name;
  double start, end;
};

std::vector<Span> spans_of(const Trace& trace) {
  std::vector<Span> out;
  const auto doc = nlohmann::json::parse(trace.json("t"));
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    const double ts = e.at("ts"), dur = e.at("dur");
    out.push_back({e.at("pid").get<int>(), e.at("tid").get<int>(),
                   e.at("args").at("step").get<int>(), e.at("name").get<std::string>(), ts,
                   ts + dur});
  }
  return out;
}

}  // namespace

// The reference's schedule in the replayed timeline (llm on 4 ranks, Z2, two steps): on every
// rank the first Newton–Schulz starts after the last of its sites' reduces has ended, and in
// the second step every site's broadcast starts after each of its owners has ended its first
// step's optimizer (nothing is published after the step: the next forward carries it).
TEST(ReplayTrace, ReferenceScheduleOrdersTheOptimizerAndTheNextForward) {
  const Built b = build("llm", 4, 1);
  project::ProjectionOptions po;
  po.engine.step.method = Method::dmuon;
  po.engine.step.reshard = plan::Reshard::z2;
  po.engine.step.tokens = 7;
  po.engine.run.warmup = 1;
  Trace trace({0, 1, 2, 3}, 4, "projected");
  po.trace = &trace;
  (void)project::project(b.topo.tree, b.plan, project::testing::nccl_machine(4, 100, 10), po);
  const auto spans = spans_of(trace);
  const auto layout = engine::make_layout(b.topo.tree, b.plan, po.engine.step, 0);
  std::set<std::string> sites;
  for (std::size_t g = 0; g < layout.groups.size(); ++g)
    if (layout.groups[g].kind == engine::GroupKind::dmuon_site)
      sites.insert("g" + std::to_string(g));
  ASSERT_GE(sites.size(), 2u);
  const auto site_of = [&](const std::string& name) {
    const auto at = name.rfind(' ');
    return at == std::string::npos || sites.count(name.substr(at + 1)) == 0 ? std::string()
                                                                            : name.substr(at + 1);
  };
  const int phases = static_cast<int>(TraceTrack::phases);
  const int compute = static_cast<int>(TraceTrack::compute);
  std::map<int, double> optimizer_end;  // rank: the end of its first step's optimizer
  for (int r = 0; r < 4; ++r)
    for (int step = 1; step <= 2; ++step) {
      double last_reduce = 0, first_ns = -1;
      for (const auto& s : spans) {
        if (s.rank != r || s.step != step) continue;
        if (s.name.rfind("issue_reduce", 0) == 0 && !site_of(s.name).empty())
          last_reduce = std::max(last_reduce, s.end);
        if (s.track == compute && s.name == "optimizer_ns" && first_ns < 0) first_ns = s.start;
        if (step == 1 && s.track == phases && s.name.rfind("optimizer", 0) == 0)
          optimizer_end[r] = std::max(optimizer_end[r], s.end);
      }
      if (first_ns >= 0) {
        EXPECT_GE(first_ns, last_reduce - 1e-6) << "rank " << r << " step " << step;
      }
    }
  int checked = 0;
  for (const auto& s : spans) {
    if (s.step != 2 || s.name.rfind("issue_weights", 0) != 0 || site_of(s.name).empty()) continue;
    const int g = std::stoi(site_of(s.name).substr(1));
    for (int pr : layout.groups[static_cast<std::size_t>(g)].pairs) {
      const int owner = layout.pairs[static_cast<std::size_t>(pr)].owner;
      EXPECT_GE(s.start, optimizer_end[owner] - 1e-6) << s.name << " owner " << owner;
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}
