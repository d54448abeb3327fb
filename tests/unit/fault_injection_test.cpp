// DMUON_INJECT_FAULT_STEP's parsing and checks (the device run and the mpiexec test use it to
// fail one rank mid-step).
#include "dmuon/engine/exec/fault_injection.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "dmuon/base/error.hpp"

namespace dmuon::engine {
namespace {

using ::testing::HasSubstr;

std::string error_of(const std::string& text) {
  try {
    (void)parse_fault_injection(text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(FaultInjection, ParsesStepAndRank) {
  const FaultInjection f = parse_fault_injection("2:1");
  EXPECT_TRUE(f.armed());
  EXPECT_EQ(f.step, 2);
  EXPECT_EQ(f.rank, 1);
  EXPECT_FALSE(parse_fault_injection("").armed());
}

TEST(FaultInjection, RefusesWhatIsNotStepColonRank) {
  for (const char* bad : {"2", "2:", ":1", "0:1", "2:-1", "x:1", "2:1:3", " 2:1", "2.5:1"})
    EXPECT_EQ(error_of(bad),
              std::string("DMUON_INJECT_FAULT_STEP='") + bad +
                  "' is invalid (valid: STEP:RANK, a step >= 1 and a world rank >= 0, e.g. 2:1)")
        << bad;
}

TEST(FaultInjection, MustNameAStepOfTheRunAndARankOfTheJob) {
  EXPECT_NO_THROW(check_fault_injection(FaultInjection{3, 1}, 3, 2));
  EXPECT_NO_THROW(check_fault_injection(FaultInjection{}, 1, 1));
  try {
    check_fault_injection(FaultInjection{4, 1}, 3, 2);
    ADD_FAILURE() << "step past the run accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("step 4 is past the run's 3 steps"));
  }
  try {
    check_fault_injection(FaultInjection{1, 2}, 3, 2);
    ADD_FAILURE() << "rank outside the job accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("rank 2 is not a rank of this 2-rank job (valid: 0..1)"));
  }
}

}  // namespace
}  // namespace dmuon::engine
