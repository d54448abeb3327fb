// The OpenBLAS generic-kernel warning: on a CPU with AVX2 or AVX-512 running OpenBLAS's generic
// (pre-AVX2) kernels the user is told, with the remedy; never otherwise. And what the running
// BLAS reports is recorded (not made up).

#include <gtest/gtest.h>

#include "kernels/blas_info.hpp"
#include "kernels/scoped_kokkos.hpp"

namespace {

using dmuon::kernels::host::BlasInfo;
using dmuon::kernels::host::generic_kernel_warning;
using dmuon::kernels::host::is_generic_core;

BlasInfo info(const char* core, const char* features) {
  BlasInfo b;
  b.library = "OpenBLAS 0.3.21 DYNAMIC_ARCH";
  b.core = core;
  b.cpu_model = "Intel(R) Xeon(R) Example";
  b.cpu_features = features;
  return b;
}

TEST(BlasInfo, GenericKernelsOnAvx512AreReportedWithTheRemedy) {
  const auto w = generic_kernel_warning(info("Prescott", "avx2,avx512f"));
  EXPECT_NE(w.find("generic 'Prescott' kernels on this AVX-512 CPU"), std::string::npos) << w;
  EXPECT_NE(w.find("OPENBLAS_CORETYPE=SkylakeX"), std::string::npos) << w;
  EXPECT_EQ(w.find('\n'), std::string::npos);
}

TEST(BlasInfo, GenericKernelsOnAvx2SuggestHaswell) {
  const auto w = generic_kernel_warning(info("Nehalem", "avx2"));
  EXPECT_NE(w.find("OPENBLAS_CORETYPE=Haswell"), std::string::npos) << w;
}

TEST(BlasInfo, NoWarningWhenTheKernelsFitOrTheCpuIsOld) {
  EXPECT_EQ(generic_kernel_warning(info("SkylakeX", "avx2,avx512f")), "");
  EXPECT_EQ(generic_kernel_warning(info("Haswell", "avx2")), "");
  EXPECT_EQ(generic_kernel_warning(info("Cooperlake", "avx2,avx512f")), "");
  EXPECT_EQ(generic_kernel_warning(info("Prescott", "")), "");      // right for a pre-AVX2 CPU
  EXPECT_EQ(generic_kernel_warning(info("", "avx2,avx512f")), "");  // not OpenBLAS
}

TEST(BlasInfo, GenericCoreNames) {
  for (const char* c : {"Prescott", "CORE2", "Nehalem", "Atom", "generic"})
    EXPECT_TRUE(is_generic_core(c)) << c;
  for (const char* c : {"Haswell", "SkylakeX", "Zen", "Cooperlake", "SapphireRapids", ""})
    EXPECT_FALSE(is_generic_core(c)) << c;
}

TEST(BlasInfo, TheRunningLibraryIsQueried) {
  // This build links OpenBLAS (BLA_VENDOR OpenBLAS): its config string names it, and the core
  // is whatever it chose on this machine (not checked: tests leave OPENBLAS_CORETYPE alone).
  const auto b = dmuon::kernels::host::blas_info();
  EXPECT_NE(b.library.find("OpenBLAS"), std::string::npos) << b.library;
  EXPECT_FALSE(b.core.empty());
  EXPECT_FALSE(b.cpu_model.empty());
}

TEST(BlasInfo, SgemmRateIsMeasured) {
  dmuon::kernels::host::ScopedKokkos kokkos;
  EXPECT_GT(dmuon::kernels::host::measure_sgemm_gflops(64, 1), 0.0);
}

}  // namespace
