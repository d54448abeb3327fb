#pragma once
// One Kokkos runtime for the whole test binary (Kokkos 4 cannot re-initialise after finalize).

#include <gtest/gtest.h>

#include <memory>

#include "kernels/scoped_kokkos.hpp"

namespace dmuon::kernels::testing {

class KokkosEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { kokkos_ = std::make_unique<host::ScopedKokkos>(); }
  void TearDown() override { kokkos_.reset(); }

 private:
  std::unique_ptr<host::ScopedKokkos> kokkos_;
};

inline ::testing::Environment* const kKokkosEnvironment =
    ::testing::AddGlobalTestEnvironment(new KokkosEnvironment);

}  // namespace dmuon::kernels::testing
