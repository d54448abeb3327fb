#pragma once
// One Kokkos runtime for the whole test binary (Kokkos may be initialised once per process):
// include this header in exactly one translation unit of an MPI test that runs the engine.

#include <gtest/gtest.h>

#include <memory>

#include "kernels/scoped_kokkos.hpp"

namespace dmuon::test {

class KokkosEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { kokkos_ = std::make_unique<kernels::host::ScopedKokkos>(); }
  void TearDown() override { kokkos_.reset(); }

 private:
  std::unique_ptr<kernels::host::ScopedKokkos> kokkos_;
};

[[maybe_unused]] inline auto* const kokkos_environment =
    ::testing::AddGlobalTestEnvironment(new KokkosEnvironment);

}  // namespace dmuon::test
