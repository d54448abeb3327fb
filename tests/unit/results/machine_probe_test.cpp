// The machine probe decision: when two sides' sgemm rates disagree, and what a timing verdict
// becomes then. Thresholds by hand: tolerance 0.2 -> ratio inside [1/1.2, 1.2] = [0.833, 1.2];
// a tolerance below kProbeNoise (0.1) uses [1/1.1, 1.1] = [0.909, 1.1].

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "dmuon/results/machine_probe.hpp"

namespace {

using namespace dmuon::results;

TEST(MachineProbe, DisagreeBeyondTheTolerance) {
  auto p = probe_agreement({100}, {70}, 0.2);
  EXPECT_TRUE(p.measured());
  EXPECT_DOUBLE_EQ(p.ratio(), 0.7);
  EXPECT_DOUBLE_EQ(p.threshold, 0.2);
  EXPECT_TRUE(p.disagree());
  EXPECT_TRUE(p.b_busier());
  EXPECT_FALSE(probe_agreement({100}, {84}, 0.2).disagree());   // 0.84 >= 0.833
  EXPECT_TRUE(probe_agreement({100}, {83}, 0.2).disagree());    // 0.83 < 0.833
  EXPECT_FALSE(probe_agreement({100}, {120}, 0.2).disagree());  // 1.2: the edge agrees
  p = probe_agreement({100}, {121}, 0.2);
  EXPECT_TRUE(p.disagree());
  EXPECT_FALSE(p.b_busier());
}

TEST(MachineProbe, TheProbesOwnNoiseIsTheFloor) {
  // A 2 % tolerance would call two probes of an unchanged machine (+-4 %) disagreeing.
  const auto p = probe_agreement({100}, {92}, 0.02);
  EXPECT_DOUBLE_EQ(p.threshold, kProbeNoise);
  EXPECT_FALSE(p.disagree());                                    // 0.92 >= 0.909
  EXPECT_TRUE(probe_agreement({100}, {90}, 0.02).disagree());    // 0.90 < 0.909
  EXPECT_FALSE(probe_agreement({100}, {110}, 0.02).disagree());  // 1.1
}

TEST(MachineProbe, EachSideIsTheMedianOfItsFilesWithAProbe) {
  // One busy invocation of three does not make the side busy; files without a probe (0, older
  // schemas) do not count.
  const auto p = probe_agreement({100, 40, 102}, {98, 0, 97, 30}, 0.1);
  EXPECT_DOUBLE_EQ(p.a_gflops, 100);
  EXPECT_DOUBLE_EQ(p.b_gflops, 97);
  EXPECT_FALSE(p.disagree());
  // A side without any probe: nothing is known, nothing disagrees.
  const auto q = probe_agreement({0}, {100}, 0.1);
  EXPECT_FALSE(q.measured());
  EXPECT_TRUE(std::isnan(q.ratio()));
  EXPECT_FALSE(q.disagree());
}

TEST(MachineProbe, EveryTimingVerdictIsUnreliableWhenTheyDisagree) {
  const auto busy_b = probe_agreement({100}, {60}, 0.1);
  const auto busy_a = probe_agreement({60}, {100}, 0.1);
  for (const auto* p : {&busy_b, &busy_a})
    for (const char* v : {"slower", "faster", "same"})
      EXPECT_EQ(verdict_given_probes(v, *p), "unreliable") << v;
  // Not about the machine: untestable samples and NaN timings keep their verdict.
  EXPECT_EQ(verdict_given_probes("untested", busy_b), "untested");
  EXPECT_EQ(verdict_given_probes("non-finite", busy_b), "non-finite");
  // Agreeing or unknown probes change nothing.
  const auto agree = probe_agreement({100}, {95}, 0.1);
  const auto unknown = probe_agreement({}, {95}, 0.1);
  for (const char* v : {"slower", "faster", "same"}) {
    EXPECT_EQ(verdict_given_probes(v, agree), v);
    EXPECT_EQ(verdict_given_probes(v, unknown), v);
  }
}

TEST(MachineProbe, OneLineWithBothRatesAndTheRatio) {
  const std::string s = describe(probe_agreement({24.9}, {16.2}, 0.2));
  EXPECT_NE(s.find("A 24.9, B 16.2 GFLOP/s per rank, B/A 0.65 outside [0.83, 1.20]"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("(B busier)"), std::string::npos) << s;
  EXPECT_EQ(s.find('\n'), std::string::npos);
  EXPECT_NE(describe(probe_agreement({24.9}, {24.0}, 0.2)).find("within"), std::string::npos);
}

}  // namespace
