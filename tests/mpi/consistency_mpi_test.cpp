// Plan-consistency check, hashing, and the MPI environment's error handling.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "dmuon/base/check.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/comm/abort.hpp"
#include "dmuon/comm/hash.hpp"
#include "mpi_test_util.hpp"

namespace dmuon::comm {
namespace {

using ::dmuon::test::world_rank;
using ::dmuon::test::world_size;
using ::testing::HasSubstr;

TEST(Hash, Fnv1aKnownVectors) {
  EXPECT_EQ(fnv1a_64(std::string_view("")), 0xcbf29ce484222325ULL);
  EXPECT_EQ(fnv1a_64(std::string_view("a")), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(fnv1a_64(std::string_view("foobar")), 0x85944171f73967e8ULL);
  const std::string s = "foobar";
  EXPECT_EQ(fnv1a_64(s.data(), s.size()), fnv1a_64(std::string_view(s)));
  EXPECT_EQ(fnv1a_64(std::string_view("bar"), fnv1a_64(std::string_view("foo"))),
            fnv1a_64(std::string_view("foobar")));
  EXPECT_NE(fnv1a_64_u64(1), fnv1a_64_u64(2));
}

TEST(VerifySameOnAllRanks, EqualHashesPass) {
  const std::uint64_t h = fnv1a_64(std::string_view("site0:owner1:4096"));
  EXPECT_NO_THROW(verify_same_on_all_ranks(h, "the site plan", MPI_COMM_WORLD));
}

TEST(VerifySameOnAllRanks, RankDependentHashThrowsOnEveryRank) {
  const std::uint64_t h = fnv1a_64_u64(static_cast<std::uint64_t>(world_rank()));
  if (world_size() == 1) {
    EXPECT_NO_THROW(verify_same_on_all_ranks(h, "the ownership plan", MPI_COMM_WORLD));
    return;
  }
  try {
    verify_same_on_all_ranks(h, "the ownership plan", MPI_COMM_WORLD);
    FAIL() << "mismatch not detected";
  } catch (const CheckFailure& e) {
    EXPECT_THAT(e.what(), HasSubstr("the ownership plan"));
    EXPECT_THAT(e.what(), HasSubstr("rank 0: "));
    EXPECT_THAT(e.what(), HasSubstr("rank 1: "));
  }
}

TEST(MpiEnvironment, WorldReturnsErrorsAsCodes) {
  MPI_Errhandler handler = MPI_ERRHANDLER_NULL;
  ASSERT_EQ(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &handler), MPI_SUCCESS);
  EXPECT_EQ(handler, MPI_ERRORS_RETURN);
  MPI_Errhandler_free(&handler);
  // A local (non-communicating) erroneous call comes back as a code, then as an exception.
  int count = 0;
  try {
    DMUON_CHECK_MPI(MPI_Type_size(MPI_DATATYPE_NULL, &count));
    FAIL() << "expected RuntimeFailure";
  } catch (const RuntimeFailure& e) {
    EXPECT_THAT(e.what(), HasSubstr("MPI_Type_size"));
  }
}

}  // namespace
}  // namespace dmuon::comm
