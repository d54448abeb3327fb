// cuBLAS is opened on first use, not at program start (kernels/cuda/cublas_library.hpp): a
// process that never runs on a GPU never maps it; the first use opens it and resolves every
// entry point (which needs the toolkit's library, not a GPU); a missing or wrong library is one
// error naming each candidate.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "kernels/cuda/cublas_library.hpp"
#include "kernels/kernel_error.hpp"

namespace dmuon::kernels::cuda {
namespace {

bool mapped(const std::string& library) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find(library) != std::string::npos) return true;
  return false;
}

// First in this file: nothing before it may have used cuBLAS.
TEST(CublasLibrary, IsMappedOnlyFromItsFirstUse) {
  ASSERT_TRUE(mapped("libc.so"));  // the probe itself reads the maps
  EXPECT_FALSE(mapped("libcublas")) << "cuBLAS was loaded at program start";
  const CublasLibrary& lib = cublas_library();
  EXPECT_TRUE(mapped("libcublas.so"));
  // cuBLAS's own description of the status, through the resolved entry point.
  EXPECT_NE(std::string(lib.status_string(CUBLAS_STATUS_NOT_INITIALIZED)).find("not initialized"),
            std::string::npos)
      << lib.status_string(CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(&lib, &cublas_library());
}

TEST(CublasLibrary, AMissingLibraryIsOneErrorNamingEachCandidate) {
  try {
    open_cublas({"libdmuon_no_such_cublas.so", "/nonexistent/libcublas.so.13"});
    FAIL() << "opened a library that does not exist";
  } catch (const KernelError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--device cuda"), std::string::npos) << m;
    EXPECT_NE(m.find("libdmuon_no_such_cublas.so:"), std::string::npos) << m;
    EXPECT_NE(m.find("/nonexistent/libcublas.so.13:"), std::string::npos) << m;
  }
}

TEST(CublasLibrary, ALibraryWithoutItsEntryPointsIsRefused) {
  try {
    open_cublas({"libm.so.6"});
    FAIL() << "took libm for cuBLAS";
  } catch (const KernelError& e) {
    EXPECT_NE(std::string(e.what()).find("libm.so.6: no symbol cublasCreate_v2"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace dmuon::kernels::cuda
