// Every case of the GPU check (dmuon_device_engine_check, device_cases.cpp), its CUDA run
// emulated on the host with the GPU's rounding points (gpu_step_emulation.hpp), against the
// same host reference file the GPU check reads, at the tolerance that check applies: what the
// GPU check would say, decided in CI without a GPU. Also the Newton–Schulz of the engine's own
// step-1 inputs, by the numerics rule against the fp16 Gram matrices it replaced
// (docs/KERNELS.md "Newton–Schulz numerics").
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "device_cases.hpp"
#include "dmuon/engine/step/optimizer_config.hpp"
#include "dmuon/engine/step/synthetic.hpp"
#include "dmuon/engine/verify/reference.hpp"
#include "gpu_step_emulation.hpp"
#include "kernels/cuda/ns_numerics.hpp"
#include "kernels/cuda/standalone/ns_emulation.hpp"
#include "kernels/scoped_kokkos.hpp"

namespace dmuon::device_check {
namespace {

using kernels::Dtype;
namespace emu = kernels::cuda::emulation;

class Kokkos : public ::testing::Environment {
 public:
  void SetUp() override { kokkos_ = std::make_unique<kernels::host::ScopedKokkos>(); }
  void TearDown() override { kokkos_.reset(); }

 private:
  std::unique_ptr<kernels::host::ScopedKokkos> kokkos_;
};
::testing::Environment* const kKokkos = ::testing::AddGlobalTestEnvironment(new Kokkos);

constexpr int kSteps = 2;  // dmuon_device_engine_check's default (+1 warmup)

// result_collection.cpp's rule: any 16-bit type a Muon parameter or the wire meets.
bool sixteen_bit(const model::ModuleTree& tree, const plan::Plan& plan,
                 const engine::EngineOptions& o) {
  if (o.step.wire != Dtype::f32 || o.backend.ns_dtype != Dtype::f32) return true;
  if (plan.narrowest_route_wire_bytes() == 2) return true;
  for (int pid : tree.parameter_order())
    if (plan.muon(pid) && plan.wire_bytes(pid, 4) == 2) return true;
  return false;
}

struct Reference {
  std::vector<std::vector<float>> weights;
  engine::AdamwEpsRegime regime;
};

TEST(GpuStepEmulation, EveryDeviceCheckCasePassesAtItsTolerance) {
  std::map<std::string, Reference> refs;  // by reference file, as the GPU check reads them
  std::printf("# %-5s %-52s %-5s %-5s %10s %9s  %s\n", "topo", "case", "wire", "ns", "rel_err",
              "tol", "worst parameter");
  const auto all = cases();
  for (const Case& c : all) {
    const Loaded l = load(c);
    const engine::EngineOptions o = options(c, l, Dtype::f16, kSteps);
    const Case rc = reference_case(c);
    auto& ref = refs[reference_path("", rc)];
    if (ref.weights.empty()) {
      const Loaded rl = load(rc);
      ref.weights = engine::reference_weights(rl.topo.tree, rl.plan,
                                              options(rc, rl, Dtype::f16, kSteps), 1, &ref.regime);
    }
    const EmulatedRun run = emulate_gpu_run(l.topo.tree, l.plan, o);
    std::string worst;
    const bool excuse = !sixteen_bit(l.topo.tree, l.plan, o);
    const double err = engine::max_relative_error(l.topo.tree, run.weights, ref.weights, &worst,
                                                  excuse ? &ref.regime : nullptr);
    const Dtype route_wire = l.plan.narrowest_route_wire_bytes() == 2 ? Dtype::bf16 : Dtype::f32;
    const double tol = o.effective_check_tolerance(route_wire);
    std::printf("  %-5s %-52s %-5s %-5s %10.3e %9.1e  %s\n", c.topology.c_str(), label(c).c_str(),
                engine::dtype_flag_name(c.wire), engine::dtype_flag_name(o.backend.ns_dtype), err,
                tol, worst.c_str());
    EXPECT_LE(err, tol) << c.topology << " " << label(c) << " (worst " << worst << ")";
  }
  EXPECT_EQ(all.size(),
            55u);  // the case list (device_cases.cpp), as the note and KERNELS.md count it
}

// The engine's step-1 Muon inputs (--ns-dtype storage, as the GPU holds them) through the rule's
// numerics and through the fp16 Gram matrices the rule replaced: the rule holds its bound on
// every matrix; the old numerics failed it on these very inputs.
TEST(GpuStepEmulation, Step1NewtonSchulzOnTheEngineInputs) {
  std::printf("# %-5s %-5s %8s %10s %10s %10s %10s\n", "topo", "dtype", "matrices", "rule_med",
              "rule_max", "fp16gram_m", "fp16gram_x");
  bool old_failed = false;
  for (const char* t : {"moe", "vla", "llm"}) {
    const Case c = make_case(t, engine::Method::dmuon, Dtype::f32, false);
    const Loaded l = load(c);
    // Step 1's Newton–Schulz inputs (the first momentum) precede every Newton–Schulz: one run
    // gives them for both storage types.
    engine::EngineOptions o = options(c, l, Dtype::f16, kSteps);
    o.run.steps = 0;  // step 1 only
    const EmulatedRun run = emulate_gpu_run(l.topo.tree, l.plan, o);
    for (Dtype st : {Dtype::f16, Dtype::bf16}) {
      o = options(c, l, st, kSteps);
      const kernels::NsConfig cfg = engine::muon_config(o).ns;
      std::vector<double> rule, old;
      const auto& order = l.topo.tree.parameter_order();
      for (std::size_t i = 0; i < order.size(); ++i) {
        const auto& in = run.step1_ns_inputs[i];
        if (in.empty()) continue;
        const auto shape = engine::matrix_shape(l.topo.tree.parameter(order[i]));
        const auto rows = static_cast<std::size_t>(shape.rows),
                   cols = static_cast<std::size_t>(shape.cols);
        const emu::Mat ref = emu::oracle(emu::Mat(in.begin(), in.end()), rows, cols, cfg);
        const auto num = kernels::cuda::ns_numerics(rows, cols, st, cfg.variant);
        rule.push_back(emu::rel_diff(emu::newton_schulz(in, rows, cols, cfg, st, num), ref));
        EXPECT_LE(rule.back(), emu::ns_error_bound(cfg, st, num, false))
            << t << " " << l.topo.tree.parameter(order[i]).name;
        const kernels::cuda::NsNumerics fp16_gram{kernels::NsVariant::gram, Dtype::f16, Dtype::f16};
        old.push_back(emu::rel_diff(emu::newton_schulz(in, rows, cols, cfg, st, fp16_gram), ref));
        old_failed |= old.back() > emu::ns_error_bound(cfg, st, num, false);
      }
      ASSERT_FALSE(rule.empty());
      std::sort(rule.begin(), rule.end());
      std::sort(old.begin(), old.end());
      std::printf("  %-5s %-5s %8zu %10.2e %10.2e %10.2e %10.2e\n", t, engine::dtype_flag_name(st),
                  rule.size(), rule[rule.size() / 2], rule.back(), old[old.size() / 2], old.back());
    }
  }
  EXPECT_TRUE(old_failed) << "the fp16 Gram matrices held the bound on every engine input";
}

}  // namespace
}  // namespace dmuon::device_check
