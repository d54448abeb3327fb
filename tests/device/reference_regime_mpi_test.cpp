// The GPU check's reference files carry the AdamW eps regime (reference_file.hpp), so an fp32
// --check against a file excuses AdamW's step-1 sign flips of near-zero gradients exactly as a
// check against a reference computed in the run does:
//   - the regime line reads back as written; a damaged one is refused naming the file; the
//     header tells runs with other --clip-norm / --accum apart (their step differs);
//   - a host run of fsdp-adamw (every parameter AdamW, fp32) checked against a file whose
//     first flagged element was moved by 1.5·lr (a flip's size, within its bound) passes and
//     says it excused it; against the same file with an empty regime it fails.

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "../mpi/kokkos_environment.hpp"
#include "../mpi/mpi_test_util.hpp"
#include "device_cases.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/engine/engine.hpp"
#include "dmuon/engine/step/optimizer_config.hpp"
#include "dmuon/engine/verify/reference.hpp"
#include "dmuon/engine/verify/reference_file.hpp"
#include "test_plan_options.hpp"

namespace {

using namespace dmuon;
using device_check::Case;

std::string temp_path(const std::string& name) {
  return std::string(::testing::TempDir()) + "dmuon_regime_r" + std::to_string(test::world_rank()) +
         "_" + name;
}

// llm fsdp-adamw in fp32 as the GPU check runs it, on the host, planned for this world.
struct AdamwRun {
  model::Topology topo;
  plan::Plan plan;
  engine::EngineOptions o;
};

AdamwRun adamw_run() {
  const Case c =
      device_check::make_case("llm", engine::Method::fsdp_adamw, kernels::Dtype::f32, true);
  test::PlanOptions po;
  po.topology = c.topology;
  AdamwRun r{test::load_topology(po), {}, {}};
  r.plan = plan::make_plan(r.topo.tree, test::make_plan_config(po, r.topo, test::world_size()));
  r.o = device_check::options(c, device_check::load(c), kernels::Dtype::f32, 2);
  r.o.backend.device = engine::Device::host;
  return r;
}

TEST(ReferenceRegime, RoundTripsAndRefusesDamage) {
  const AdamwRun r = adamw_run();
  const auto& tree = r.topo.tree;
  engine::AdamwEpsRegime regime;
  regime.bound_per_step = 0.002;
  regime.elements.assign(tree.parameter_order().size(), {});
  regime.elements[0] = {{3, 1}, {17, 2}};
  regime.elements.back() = {{0, 1}};
  std::vector<std::vector<float>> w;
  for (int pid : tree.parameter_order())
    w.emplace_back(static_cast<std::size_t>(tree.parameter(pid).numel()), 0.5f);
  const std::string header = engine::reference_header(tree, r.plan, r.o, 1);
  const std::string path = temp_path("roundtrip.ref");
  engine::write_reference(path, header, w, &regime);
  const engine::ReferenceWeights got = engine::read_reference_check(path, header, tree);
  EXPECT_EQ(got.weights, w);
  ASSERT_TRUE(got.eps_regime);
  EXPECT_EQ(got.eps_regime->bound_per_step, regime.bound_per_step);
  EXPECT_EQ(got.eps_regime->elements, regime.elements);
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << "DMUON-REFERENCE 2\n" << header << "\n{\"bound_per_step\": 0.002, \"elements\": [[0]]}\n";
  }
  try {
    (void)engine::read_reference_check(path, header, tree);
    FAIL() << "a damaged eps-regime line was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
  // Clipping and accumulation change the step: their references are other files.
  engine::EngineOptions other = r.o;
  other.step.clip_norm = 0.5;
  EXPECT_NE(engine::reference_header(tree, r.plan, other, 1), header);
  other = r.o;
  other.step.accum = 3;
  EXPECT_NE(engine::reference_header(tree, r.plan, other, 1), header);
}

TEST(ReferenceRegime, Fp32CheckAgainstAFileExcusesItsFlaggedElements) {
  AdamwRun r = adamw_run();
  const auto& tree = r.topo.tree;
  const std::string with = temp_path("with.ref"), without = temp_path("without.ref");
  // Every rank writes its own copy (no shared file system is assumed between ranks).
  engine::AdamwEpsRegime regime;
  auto w = engine::reference_weights(tree, r.plan, r.o, test::world_size(), &regime);
  // The flagged element of the smallest parameter: moving it is far beyond fp32's 1e-4 there.
  std::size_t p = regime.elements.size();
  double smallest = 0;
  for (std::size_t i = 0; i < regime.elements.size(); ++i) {
    if (regime.elements[i].empty()) continue;
    double norm = 0;
    for (float v : w[i]) norm += static_cast<double>(v) * v;
    if (p == regime.elements.size() || norm < smallest) p = i, smallest = norm;
  }
  ASSERT_LT(p, regime.elements.size()) << "no AdamW element in the eps regime to plant a flip on";
  const auto element = static_cast<std::size_t>(regime.elements[p].front().first);
  w[p][element] += 1.5f * engine::adamw_config().lr;  // a flip moves it by up to 2·lr
  const std::string header = engine::reference_header(tree, r.plan, r.o, test::world_size());
  engine::write_reference(with, header, w, &regime);
  engine::AdamwEpsRegime none;
  none.bound_per_step = regime.bound_per_step;
  engine::write_reference(without, header, w, &none);

  r.o.run.check_reference = [&] { return engine::read_reference_check(with, header, tree); };
  const auto excused = engine::run_engine(tree, r.plan, r.o, MPI_COMM_WORLD);
  EXPECT_TRUE(excused.check_passed) << excused.max_rel_error << " " << excused.worst_param;
  EXPECT_NE(excused.check_note.find("AdamW element(s)"), std::string::npos) << excused.check_note;

  r.o.run.check_reference = [&] { return engine::read_reference_check(without, header, tree); };
  const auto strict = engine::run_engine(tree, r.plan, r.o, MPI_COMM_WORLD);
  EXPECT_FALSE(strict.check_passed) << strict.max_rel_error;
  std::remove(with.c_str());
  std::remove(without.c_str());
}

}  // namespace
