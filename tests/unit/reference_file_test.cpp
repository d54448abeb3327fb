// Reference files (the GPU check's --check oracle written on the host): what was written reads
// back bit for bit; a file made for other settings, a damaged or truncated one is refused with a
// message naming the file.

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "dmuon/base/error.hpp"
#include "dmuon/engine/verify/reference_file.hpp"
#include "dmuon/model/topology.hpp"
#include "dmuon/plan/plan.hpp"

namespace {

using namespace dmuon;

struct Fixture {
  model::ModuleTree tree{"M"};
  plan::Plan plan;
  Fixture() {
    const int list = tree.add_module(0, "layers", "ModuleList");
    tree.add_parameter(tree.add_module(list, "0", "L"), "w", {2, 3});
    tree.add_parameter(tree.add_module(list, "1", "L"), "w", {4});
    tree.finalize();
    plan::PlanConfig c;
    c.dedicate_rule = "ndim>=2";
    c.partition.shard = 1;
    plan = plan::make_plan(tree, c);
  }
};

std::string temp_path(const char* name) {
  return std::string(::testing::TempDir()) + name;
}

TEST(ReferenceFile, RoundTripsBitForBit) {
  Fixture f;
  engine::EngineOptions o;
  const std::string header = engine::reference_header(f.tree, f.plan, o, 1);
  const std::vector<std::vector<float>> w = {{1, -2, 3.5f, 1e-30f, -0.0f, 7}, {9, 8, 7, 6}};
  const auto path = temp_path("dmuon_ref_roundtrip.ref");
  engine::write_reference(path, header, w);
  EXPECT_EQ(engine::read_reference(path, header, f.tree), w);
  std::remove(path.c_str());
}

TEST(ReferenceFile, RefusesOtherSettingsAndDamage) {
  Fixture f;
  engine::EngineOptions o;
  const std::string header = engine::reference_header(f.tree, f.plan, o, 1);
  const auto path = temp_path("dmuon_ref_damage.ref");
  engine::write_reference(path, header, {{1, 2, 3, 4, 5, 6}, {7, 8, 9, 10}});
  o.run.seed = 2;  // the weights depend on the seed: a reference for seed 1 is not one for seed 2
  const std::string other = engine::reference_header(f.tree, f.plan, o, 1);
  EXPECT_NE(other, header);
  try {
    (void)engine::read_reference(path, other, f.tree);
    FAIL() << "a reference for other settings was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  // The wire and the world do not change the one-process arithmetic: the same file serves.
  o.run.seed = 1;
  o.step.wire = kernels::Dtype::bf16;
  EXPECT_EQ(engine::reference_header(f.tree, f.plan, o, 1), header);
  {
    std::ofstream cut(path, std::ios::binary | std::ios::trunc);
    cut << "DMUON-REFERENCE 1\n" << header << "\n" << std::string(8, '\0');
  }
  EXPECT_THROW((void)engine::read_reference(path, header, f.tree), InputError);  // truncated
  {
    std::ofstream junk(path, std::ios::binary | std::ios::trunc);
    junk << "\x89HDF\r\n";
  }
  EXPECT_THROW((void)engine::read_reference(path, header, f.tree), InputError);  // not ours
  EXPECT_THROW((void)engine::read_reference(temp_path("dmuon_ref_missing.ref"), header, f.tree),
               InputError);
  std::remove(path.c_str());
}

}  // namespace
