// dmuon_bench's CUDA module loading: EAGER by default, the user's choice when set.
#include "common/cuda_environment.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace dmuon::apps {
namespace {

TEST(CudaEnvironment, EagerModuleLoadingUnlessTheUserChose) {
  ::unsetenv("CUDA_MODULE_LOADING");
  prefer_eager_cuda_module_loading();
  ASSERT_NE(std::getenv("CUDA_MODULE_LOADING"), nullptr);
  EXPECT_EQ(std::string(std::getenv("CUDA_MODULE_LOADING")), "EAGER");
  ::setenv("CUDA_MODULE_LOADING", "LAZY", 1);
  prefer_eager_cuda_module_loading();
  EXPECT_EQ(std::string(std::getenv("CUDA_MODULE_LOADING")), "LAZY");
  ::unsetenv("CUDA_MODULE_LOADING");
}

}  // namespace
}  // namespace dmuon::apps
