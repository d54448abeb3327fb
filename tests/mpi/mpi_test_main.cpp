// Shared main for MPI GoogleTest executables: initializes MPI, runs the tests on every rank,
// combines every rank's verdict (MPI_Allreduce), and lets only rank 0 print the full report.
// Other ranks print only their own failures, prefixed with their rank, so nothing is hidden.

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <exception>

#include "dmuon/comm/mpi_environment.hpp"

namespace {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                 r.file_name() ? r.file_name() : "?", r.line_number(), r.summary());
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result()->Failed())
      std::fprintf(stderr, "[rank %d] FAILED %s.%s\n", rank_, info.test_suite_name(), info.name());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  try {
    dmuon::comm::MpiEnvironment env(&argc, &argv);
    ::testing::InitGoogleTest(&argc, argv);
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    if (env.rank() != 0) {
      delete listeners.Release(listeners.default_result_printer());
      listeners.Append(new RankFailurePrinter(env.rank()));
    }
    const int local_failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
    int failed_ranks = 0;
    MPI_Allreduce(&local_failed, &failed_ranks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (env.rank() == 0) {
      if (failed_ranks == 0)
        std::printf("[ MPI      ] all %d rank(s) PASSED\n", env.size());
      else
        std::printf("[ MPI      ] FAILED on %d of %d rank(s)\n", failed_ranks, env.size());
      std::fflush(stdout);
    }
    return failed_ranks == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpi test main: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  }
}
