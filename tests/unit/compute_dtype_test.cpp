// --compute-dtype on the engine's backends: fp8 has no kernel in kernels/ (host or CUDA), so
// both refuse it with one line rather than compute in another type; the projection's names.

#include <gtest/gtest.h>

#include <string>

#include "dmuon/base/error.hpp"
#include "dmuon/engine/engine.hpp"

namespace {

using namespace dmuon;
using engine::ComputeDtype;

std::string refusal(engine::Device device) {
  engine::EngineOptions o;
  o.backend.device = device;
  o.step.compute_dtype = ComputeDtype::fp8;
  try {
    engine::validate_compute(o);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(ComputeDtype, Fp8RefusedOnTheHostAndCudaBackends) {
  EXPECT_EQ(refusal(engine::Device::host),
            "--compute-dtype fp8 is invalid on --device host (valid: fp32: the host computes in "
            "fp32; fp8 is dmuon_project's only)");
  const std::string cuda = refusal(engine::Device::cuda);
  EXPECT_NE(cuda.find("--compute-dtype fp8 is invalid on --device cuda"), std::string::npos)
      << cuda;
}

TEST(ComputeDtype, Fp8RunsItsOtherOpsInBf16) {
  EXPECT_EQ(engine::activation_dtype(ComputeDtype::fp8), kernels::Dtype::bf16);
  EXPECT_EQ(engine::activation_dtype(ComputeDtype::f32), kernels::Dtype::f32);
  EXPECT_STREQ(engine::compute_dtype_name(ComputeDtype::fp8), "fp8");
}

}  // namespace
