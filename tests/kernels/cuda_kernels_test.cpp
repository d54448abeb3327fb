// CUDA kernels: without CUDA compiled in, every entry point throws a clear KernelError; with
// CUDA but no GPU the test skips; on a GPU, randomized comparisons against the host oracle.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/cuda/kernels.hpp"
#include "kernels/kernel_error.hpp"
#include "kernels/muon.hpp"
#include "kernels/newton_schulz.hpp"
#include "kokkos_environment.hpp"
#include "test_util.hpp"

namespace dmuon::kernels {
namespace {

bool have_gpu(std::string* why) {
  if (!cuda::compiled()) {
    *why = "CUDA kernels not compiled";
    return false;
  }
  try {
    if (cuda::device_count() > 0) return true;
    *why = "no GPU";
  } catch (const KernelError& e) {
    *why = e.what();
  }
  return false;
}

TEST(CudaKernels, StubThrowsClearErrorWhenNotCompiled) {
  if (cuda::compiled()) GTEST_SKIP() << "CUDA compiled in";
  try {
    cuda::Context ctx;
    FAIL() << "no exception";
  } catch (const KernelError& e) {
    EXPECT_NE(std::string(e.what()).find("DMUON_ENABLE_CUDA=ON"), std::string::npos);
  }
}

struct DeviceBuffer {
  explicit DeviceBuffer(std::size_t bytes) : ptr(cuda::device_alloc(bytes)) {}
  ~DeviceBuffer() { cuda::device_free(ptr); }
  void* ptr;
};

TEST(CudaKernels, NewtonSchulzMatchesHost) {
  std::string why;
  if (!have_gpu(&why)) GTEST_SKIP() << why;
  cuda::Context ctx;
  for (const auto& [m, n] :
       std::vector<std::pair<std::size_t, std::size_t>>{{64, 192}, {192, 64}}) {
    for (NsVariant variant : {NsVariant::direct, NsVariant::gram}) {
      const auto g = testing::random_matrix(m, n, 3);
      NsConfig cfg;
      cfg.variant = variant;
      host::NsWorkspace hws(m, n);
      std::vector<float> ref(m * n), got(m * n);
      host::newton_schulz(g.data(), ref.data(), m, n, cfg, hws, "w");
      for (cuda::Storage st : {cuda::Storage::f32, cuda::Storage::bf16}) {
        cuda::NsWorkspace dws(m, n, st);
        DeviceBuffer d32(m * n * 4), dst(m * n * 4);
        cuda::copy_to_device(d32.ptr, g.data(), m * n * 4);
        cuda::convert_from_f32(ctx, static_cast<float*>(d32.ptr), dst.ptr, m * n, st);
        cuda::newton_schulz(ctx, dst.ptr, dst.ptr, m, n, st, cfg, dws, "w");
        cuda::convert_to_f32(ctx, dst.ptr, static_cast<float*>(d32.ptr), m * n, st);
        ctx.synchronize();
        cuda::copy_to_host(got.data(), d32.ptr, m * n * 4);
        // fp32: BLAS ordering only; bf16 storage: 8-bit mantissa (~4e-3) per rounding.
        EXPECT_LT(testing::rel_diff(got, ref), st == cuda::Storage::f32 ? 1e-4 : 5e-2)
            << m << "x" << n << " " << to_string(variant) << " " << cuda::to_string(st);
      }
    }
  }
}

TEST(CudaKernels, MuonStepMatchesHost) {
  std::string why;
  if (!have_gpu(&why)) GTEST_SKIP() << why;
  cuda::Context ctx;
  const std::size_t m = 48, n = 80, count = m * n;
  auto w = testing::random_matrix(m, n, 1);
  std::vector<float> buf(count, 0.0f), w_dev_result(count);
  DeviceBuffer dw(count * 4), dg(count * 4), db(count * 4);
  cuda::copy_to_device(dw.ptr, w.data(), count * 4);
  cuda::copy_to_device(db.ptr, buf.data(), count * 4);
  host::NsWorkspace hws(m, n);
  cuda::NsWorkspace dws(m, n, cuda::Storage::f32);
  for (long t = 1; t <= 3; ++t) {
    const auto g = testing::random_matrix(m, n, 10 + static_cast<unsigned>(t));
    cuda::copy_to_device(dg.ptr, g.data(), count * 4);
    host::muon_step(w.data(), g.data(), buf.data(), m, n, t, MuonConfig{}, hws, "w");
    cuda::muon_step(ctx, static_cast<float*>(dw.ptr), static_cast<float*>(dg.ptr),
                    static_cast<float*>(db.ptr), m, n, t, MuonConfig{}, dws, "w");
  }
  ctx.synchronize();
  cuda::copy_to_host(w_dev_result.data(), dw.ptr, count * 4);
  EXPECT_LT(testing::rel_diff(w_dev_result, w), 1e-5);
}

}  // namespace
}  // namespace dmuon::kernels
