// Comparison of results files: exact deterministic quantities; timings by a one-sided
// Mann-Whitney U test over per-sample step times with a minimum effect size; the run key.

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "dmuon/base/error.hpp"
#include "dmuon/results/compare.hpp"
#include "sample_record.hpp"

namespace {

using namespace dmuon;
using namespace dmuon::results;

// Gives run 0 `step_ms.size()` samples on 2 ranks: rank 1 is the slowest with exactly
// step_ms[s] (its step time), rank 0 takes 90 % of it; phases forward + optimizer split it 3:1.
void set_samples(RunRecord& r, const std::vector<double>& step_ms) {
  auto& t = r.timings;
  t.phases = {"forward", "optimizer"};
  t.steps = static_cast<std::int64_t>(step_ms.size());
  t.ranks = 2;
  t.repeats = 1;
  t.seconds.clear();
  t.step_seconds.clear();
  for (double ms : step_ms)
    for (double f : {0.9, 1.0}) {
      const double s = 1e-3 * ms * f;
      t.seconds.push_back(0.75 * s);
      t.seconds.push_back(0.25 * s);
      t.step_seconds.push_back(s);
    }
  r.summary.erase("step_ms");
}

// 10 distinct samples around 100 ms (a noisy but stable run).
std::vector<double> base_samples(double scale = 1.0) {
  std::vector<double> v;
  for (double x : {100.0, 103.0, 97.0, 101.0, 99.0, 104.0, 96.0, 102.0, 98.0, 100.5})
    v.push_back(scale * x);
  return v;
}

ResultsFile with_samples(const std::vector<double>& step_ms) {
  auto f = fixture::sample_file();
  set_samples(f.runs[0], step_ms);
  return f;
}

TEST(Compare, IdenticalFilesAreOk) {
  const auto a = with_samples(base_samples());
  const auto c = compare_results(a, a, 0.1);
  ASSERT_EQ(c.runs.size(), 2u);
  EXPECT_TRUE(c.ok());
  EXPECT_EQ(c.runs[0].check(), "OK");
  EXPECT_DOUBLE_EQ(c.runs[0].a_step_ms, 100.25);  // median of the 10 samples
  ASSERT_EQ(c.runs[0].timings.size(), 2u);
  EXPECT_TRUE(c.runs[0].timings[0].testable);
  EXPECT_EQ(c.runs[0].timings[0].verdict, "same");
}

TEST(Compare, DeterministicDifferencesAreMismatches) {
  const auto a = fixture::sample_file();
  auto b = a;
  b.runs[0].collectives.calls_per_step[1] += 1;
  b.runs[0].params.owner_rank[0] = 0;
  b.runs[0].sites.owners[0] = {1};
  const auto c = compare_results(a, b, 0.1);
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(c.mismatches(), 1);
  EXPECT_EQ(c.regressions(), 0);
  const auto& m = c.runs[0].mismatches;
  ASSERT_EQ(m.size(), 3u);
  EXPECT_NE(m[0].find("site 0 (layers.0) owners"), std::string::npos) << m[0];
  EXPECT_NE(m[1].find("owner of layers.0.w: A rank 1 vs B rank 0"), std::string::npos) << m[1];
  EXPECT_NE(m[2].find("broadcast calls/step rank 1: A 2 vs B 3"), std::string::npos) << m[2];
  EXPECT_EQ(c.runs[0].check(), "MISMATCH");
}

TEST(Compare, LoadsAuditAndCheckAreDeterministic) {
  const auto a = fixture::sample_file();
  auto b = a;
  b.runs[0].partition.cost_loads = {1, 2};
  auto c = compare_results(a, b, 0.1);
  ASSERT_EQ(c.runs[0].mismatches.size(), 1u);
  EXPECT_NE(c.runs[0].mismatches[0].find("partition cost loads: A [0,3] vs B [1,2]"),
            std::string::npos);
  b = a;
  b.runs[0].summary_text["check"] = "failed";
  c = compare_results(a, b, 0.1);
  ASSERT_EQ(c.runs[0].mismatches.size(), 1u);
  EXPECT_NE(c.runs[0].mismatches[0].find("--check: A passed vs B failed"), std::string::npos);
  b.runs[0].summary_text["check"] = "not run";  // the check ran in A only: a note
  c = compare_results(a, b, 0.1);
  EXPECT_TRUE(c.ok());
  ASSERT_FALSE(c.runs[0].notes.empty());
  EXPECT_NE(c.runs[0].notes[0].find("--check ran in A only"), std::string::npos);
  b = a;
  b.runs[0].summary["audit_ok"] = 0;
  b.runs[0].summary_text["audit"] = "rank 1 step 2 reduce: measured 3 calls";
  auto a2 = a;
  a2.runs[0].summary["audit_ok"] = 1;
  c = compare_results(a2, b, 0.1);
  ASSERT_EQ(c.mismatches(), 1);
  EXPECT_NE(c.runs[0].mismatches[0].find("byte audit: A ok vs B rank 1 step 2"), std::string::npos);
}

TEST(Compare, TwiceAsSlowIsARegression) {
  const auto a = with_samples(base_samples());
  const auto b = with_samples(base_samples(2.0));
  const auto c = compare_results(a, b, 0.2);
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(c.regressions(), 1);
  EXPECT_EQ(c.runs[0].check(), "SLOWER");
  ASSERT_FALSE(c.runs[0].regressions.empty());
  EXPECT_NE(c.runs[0].regressions[0].find("step_ms"), std::string::npos);
  // Complete separation of 10 vs 10 samples: p = 1/C(20,10) = 5.4e-6.
  EXPECT_NEAR(c.runs[0].timings[0].p_slower, 1.0 / 184756, 1e-10);
  EXPECT_NEAR(c.runs[0].timings[0].change, 1.0, 1e-12);
  // The reverse is an improvement, not a failure.
  const auto d = compare_results(b, a, 0.2);
  EXPECT_TRUE(d.ok());
  EXPECT_EQ(d.runs[0].check(), "FASTER");
}

TEST(Compare, SignificantButSmallIsNotARegression) {
  // Every B sample 5 % slower: significant (complete separation would need > 8 %, but the U
  // test still finds it) yet below the 10 % minimum effect.
  const auto a = with_samples(base_samples());
  const auto b = with_samples(base_samples(1.05));
  const auto c = compare_results(a, b, 0.1);
  EXPECT_TRUE(c.ok());
  EXPECT_LT(c.runs[0].timings[0].p_slower, 0.05);
  EXPECT_EQ(c.runs[0].timings[0].verdict, "same");
  // The same change passes a tolerance below it.
  EXPECT_FALSE(compare_results(a, b, 0.02).ok());
}

TEST(Compare, LargeButNotSignificantIsNotARegression) {
  // Medians 20 % apart but the samples overlap completely (one slow outlier-heavy run): the U
  // test cannot tell them apart, so noise is not called a regression.
  const auto a = with_samples({100, 100, 130, 130, 100, 130, 100, 130});
  const auto b = with_samples({100, 130, 130, 130, 100, 130, 100, 130});
  const auto c = compare_results(a, b, 0.1);
  EXPECT_GT(c.runs[0].timings[0].change, 0.1);
  EXPECT_GE(c.runs[0].timings[0].p_slower, 0.05);
  EXPECT_TRUE(c.ok());
}

TEST(Compare, TooFewSamplesAreUntestedNotFailed) {
  // 2 vs 2 samples: the smallest one-sided p is 1/C(4,2) = 1/6 > 0.05.
  const auto a = with_samples({100, 101});
  const auto b = with_samples({200, 201});
  const auto c = compare_results(a, b, 0.1);
  EXPECT_TRUE(c.ok());
  EXPECT_EQ(c.untested(), 1);
  EXPECT_EQ(c.runs[0].check(), "UNTESTED");
  ASSERT_FALSE(c.runs[0].notes.empty());
  EXPECT_NE(c.runs[0].notes[0].find("2 vs 2 samples cannot reach p < 0.05"), std::string::npos);
}

TEST(Compare, NonFiniteTimingsAreRegressions) {
  const auto a = with_samples(base_samples());
  for (double bad :
       {std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::infinity(),
        std::numeric_limits<double>::infinity(), -1.0}) {
    auto b = a;
    b.runs[0].timings.step_seconds[5] = bad;
    const auto c = compare_results(a, b, 0.1);
    EXPECT_FALSE(c.ok()) << bad;
    ASSERT_EQ(c.regressions(), 1) << bad;
    EXPECT_NE(c.runs[0].regressions[0].find("non-finite timing in B: sample 2 rank 1"),
              std::string::npos)
        << c.runs[0].regressions[0];
    auto d = a;
    d.runs[0].timings.seconds[3] = bad;  // a phase of A
    EXPECT_FALSE(compare_results(d, a, 0.1).ok()) << bad;
  }
  // Also in a summary that has no samples behind it.
  auto e = fixture::sample_file();
  e.runs[0].summary["step_ms"] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(compare_results(fixture::sample_file(), e, 0.1).ok());
}

TEST(Compare, DeterministicOnlyIgnoresTimings) {
  const auto a = with_samples(base_samples());
  auto b = with_samples(base_samples(3.0));
  b.runs[0].timings.step_seconds[0] = std::numeric_limits<double>::quiet_NaN();
  CompareOptions o;
  o.deterministic_only = true;
  const auto c = compare_results(a, b, o);
  EXPECT_TRUE(c.ok());
  EXPECT_TRUE(c.runs[0].timings.empty());
  b.runs[0].collectives.bytes_per_rank_per_step[0] += 4;
  EXPECT_FALSE(compare_results(a, b, o).ok());
}

TEST(Compare, TimingsOfDifferentMachinesAreNotCompared) {
  auto a = with_samples(base_samples());
  auto b = with_samples(base_samples(2.0));
  a.provenance.device = b.provenance.device = "host";
  a.provenance.device_model = "AMD EPYC";
  b.provenance.device_model = "Intel Xeon";
  a.provenance.blas_core = b.provenance.blas_core = "Haswell";
  auto c = compare_results(a, b, 0.2);
  EXPECT_TRUE(c.ok());
  EXPECT_TRUE(c.timings_skipped);
  ASSERT_FALSE(c.notes.empty());
  EXPECT_NE(c.notes.back().find("A ran on AMD EPYC, B on Intel Xeon"), std::string::npos);
  CompareOptions o;
  o.tolerance = 0.2;
  o.any_machine = true;
  EXPECT_FALSE(compare_results(a, b, o).ok());
  b.provenance.device_model = "AMD EPYC";
  b.provenance.blas_core = "Prescott";  // the same CPU with OpenBLAS's generic kernels
  c = compare_results(a, b, 0.2);
  EXPECT_TRUE(c.timings_skipped);
  b.provenance.blas_core = "Haswell";
  EXPECT_FALSE(compare_results(a, b, 0.2).ok());
}

TEST(Compare, TimingsAreUnreliableWhenTheMachineProbesDisagree) {
  // The sgemm measured at the start of both runs 30 % apart (beyond the tolerance 20 %): B's
  // 2x would be a regression, but the machine's state changed, so it is UNRELIABLE, not a
  // failure, with what the samples said.
  auto a = with_samples(base_samples());
  auto b = with_samples(base_samples(2.0));
  a.provenance.sgemm_gflops = 100;
  b.provenance.sgemm_gflops = 70;
  const auto c = compare_results(a, b, 0.2);
  EXPECT_FALSE(c.timings_skipped);
  EXPECT_TRUE(c.probe.disagree());
  EXPECT_TRUE(c.ok());
  EXPECT_EQ(c.regressions(), 0);
  EXPECT_EQ(c.unreliable(), 1);
  EXPECT_EQ(c.runs[0].check(), "UNRELIABLE");
  ASSERT_EQ(c.runs[0].timings.size(), 2u);
  for (const auto& t : c.runs[0].timings) {
    EXPECT_EQ(t.verdict, "unreliable");
    EXPECT_EQ(t.unreliable_verdict, "slower");
  }
  ASSERT_EQ(c.runs[0].unreliable.size(), 2u);
  EXPECT_NE(c.runs[0].unreliable[0].find("step_ms: the samples say slower (+100.0 %"),
            std::string::npos)
      << c.runs[0].unreliable[0];
  ASSERT_FALSE(c.notes.empty());
  EXPECT_NE(c.notes.front().find("A 100.0, B 70.0 GFLOP/s per rank, B/A 0.70 outside"),
            std::string::npos)
      << c.notes.front();
  // A's machine the busier: B's speed-up is no more the code's than a slowdown would be.
  const auto d = compare_results(b, a, 0.2);
  EXPECT_EQ(d.runs[0].check(), "UNRELIABLE");
  EXPECT_EQ(d.runs[0].timings[0].unreliable_verdict, "faster");
  // A run that equals A's: "same" is no more known than "slower".
  auto e = with_samples(base_samples());
  e.provenance.sgemm_gflops = 70;
  EXPECT_EQ(compare_results(a, e, 0.2).runs[0].timings[0].unreliable_verdict, "same");
}

TEST(Compare, ProbesThatAgreeLeaveARegressionFailing) {
  // 100 vs 85 GFLOP/s is within [1/1.2, 1.2]: the 2x slowdown is the code's.
  auto a = with_samples(base_samples());
  auto b = with_samples(base_samples(2.0));
  a.provenance.sgemm_gflops = 100;
  b.provenance.sgemm_gflops = 85;
  const auto c = compare_results(a, b, 0.2);
  EXPECT_FALSE(c.probe.disagree());
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(c.regressions(), 1);
  EXPECT_EQ(c.unreliable(), 0);
  EXPECT_EQ(c.runs[0].check(), "SLOWER");
  // The threshold follows the tolerance: at 10 % the same probes disagree.
  EXPECT_TRUE(compare_results(a, b, 0.1).probe.disagree());
}

TEST(Compare, CountedDifferencesFailWhateverTheProbes) {
  auto a = with_samples(base_samples());
  auto b = with_samples(base_samples(2.0));
  a.provenance.sgemm_gflops = 100;
  b.provenance.sgemm_gflops = 40;
  b.runs[0].collectives.calls_per_step[0] += 1;
  const auto c = compare_results(a, b, 0.2);
  EXPECT_TRUE(c.probe.disagree());
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(c.mismatches(), 1);
  EXPECT_EQ(c.runs[0].check(), "MISMATCH");
  // A NaN timing is a broken measurement, not a busy machine: still a regression.
  auto n = with_samples(base_samples());
  n.provenance.sgemm_gflops = 40;
  n.runs[0].timings.step_seconds[3] = std::numeric_limits<double>::quiet_NaN();
  const auto d = compare_results(a, n, 0.2);
  EXPECT_FALSE(d.ok());
  EXPECT_EQ(d.regressions(), 1);
}

TEST(Compare, EveryTimingTestCarriesItsMinimumDetectableEffect) {
  // 4 samples a side, A = B = {100, 110, 120, 130} ms (median 115): the 15th smallest of the
  // 16 differences is 20 ms (detectable_effect_test), so the MDE is 20/115 = 17.4 %.
  const auto a = with_samples({100, 110, 120, 130});
  const auto c = compare_results(a, a, 0.1);
  const auto& t = c.runs[0].timings[0];
  ASSERT_TRUE(t.detectable.reachable);
  EXPECT_NEAR(t.detectable.relative, 20.0 / 115, 1e-12);
  // 3 vs 3 cannot reach p < 0.05 at all: untested, and the note says how many samples would.
  const auto u = compare_results(with_samples({100, 101, 102}), with_samples({200, 201, 202}), 0.1);
  EXPECT_FALSE(u.runs[0].timings[0].detectable.reachable);
  EXPECT_EQ(u.runs[0].check(), "UNTESTED");
  bool said = false;
  for (const auto& n : u.runs[0].notes)
    said |=
        n.find("n too small to reach significance (need 4 samples per side)") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(Compare, BadOptionsAreInputErrors) {
  const auto a = fixture::sample_file();
  EXPECT_THROW(compare_results(a, a, -1), InputError);
  EXPECT_THROW(compare_results(a, a, std::nan("")), InputError);
  CompareOptions o;
  o.alpha = 0;
  EXPECT_THROW(compare_results(a, a, o), InputError);
  o.alpha = 1;
  EXPECT_THROW(compare_results(a, a, o), InputError);
}

TEST(Compare, UnmatchedRuns) {
  const auto a = fixture::sample_file();
  auto b = a;
  b.runs[0].method = "fsdp-adamw";
  const auto c = compare_results(a, b, 0.1);
  EXPECT_EQ(c.only_a.size(), 1u);
  EXPECT_EQ(c.only_b.size(), 1u);
  EXPECT_FALSE(c.ok());  // a run of the baseline disappeared
  const auto d = compare_results(b, fixture::sample_file(), 0.1);
  EXPECT_EQ(d.only_a.size(), 1u);
  auto e = a;
  e.runs.pop_back();
  EXPECT_TRUE(compare_results(e, a, 0.1).ok());  // a new run in B alone is fine
}

TEST(Compare, EveryInputThatChangesANumberIsInTheKey) {
  const auto a = fixture::sample_file();
  const auto changes = std::vector<std::function<void(RunRecord&)>>{
      [](RunRecord& r) { r.compute = "none"; },
      [](RunRecord& r) { r.global_samples *= 2; },
      [](RunRecord& r) { r.steps += 1; },
      [](RunRecord& r) { r.warmup += 1; },
      [](RunRecord& r) { r.seed += 1; },
      [](RunRecord& r) { r.device = "cuda"; },
      [](RunRecord& r) { r.comm_dtype = "bf16"; },
      [](RunRecord& r) { r.ns = "gram"; },
      [](RunRecord& r) { r.ns_dtype = "fp16"; },
      [](RunRecord& r) { r.optimizer_pipeline = "per-group"; },
      [](RunRecord& r) { r.method = "fsdp-muon"; },
      [](RunRecord& r) { r.replicate = 2; },
      [](RunRecord& r) { r.world_size = 4; },
      [](RunRecord& r) { r.prefetch = 0; },
      [](RunRecord& r) { r.grad_reduce = "per-param"; },
      [](RunRecord& r) { r.reshard = "z3"; },
      [](RunRecord& r) { r.partition.strategy = "lpt_refine"; },
      [](RunRecord& r) { r.partition.cost_model = "numel"; },
      [](RunRecord& r) { r.plan_options = "pack=off"; },
      [](RunRecord& r) { r.sets = "layers=2"; },
      [](RunRecord& r) { r.dedicate_rule = "ndim=2"; },
      [](RunRecord& r) { r.strict = false; },
      [](RunRecord& r) { r.boundary_spec = "default"; },
      [](RunRecord& r) { r.preset = "paper"; },
      [](RunRecord& r) { r.clip_norm = "1:2"; },
      [](RunRecord& r) { r.accum = 4; },
  };
  for (std::size_t i = 0; i < changes.size(); ++i) {
    auto b = a;
    changes[i](b.runs[0]);
    EXPECT_NE(run_key(a.runs[0]), run_key(b.runs[0])) << "change " << i;
    const auto c = compare_results(a, b, 0.1);
    EXPECT_EQ(c.only_a.size(), 1u) << "change " << i;
    EXPECT_FALSE(c.ok()) << "change " << i;
  }
}

TEST(Compare, StatusChangeIsAMismatch) {
  const auto a = fixture::sample_file();
  auto b = a;
  b.runs[1].status = "ok";
  const auto c = compare_results(a, b, 0.1);
  EXPECT_EQ(c.mismatches(), 1);
  EXPECT_NE(c.runs[1].mismatches[0].find("status: A rejected vs B ok"), std::string::npos);
}

}  // namespace

// Several invocations per side: the invocations are compared as units as well as the samples.
Comparison compare_sides(const std::vector<ResultsFile>& a, const std::vector<ResultsFile>& b,
                         double tolerance) {
  std::vector<const ResultsFile*> pa, pb;
  for (const auto& f : a) pa.push_back(&f);
  for (const auto& f : b) pb.push_back(&f);
  CompareOptions o;
  o.tolerance = tolerance;
  return compare_results(pa, pb, o);
}

TEST(CompareInvocations, AShiftWithinTheBaselinesOwnSpreadIsNotARegression) {
  // A's two invocations differ by 40 % (the machine, not the code); B's sit 5.4 % above A's
  // slowest. Pooled, B is +23 % and significant, which one file per side would call SLOWER.
  const std::vector<ResultsFile> a{with_samples(base_samples(1.0)),
                                   with_samples(base_samples(1.4))};
  const std::vector<ResultsFile> b{with_samples(base_samples(1.45)),
                                   with_samples(base_samples(1.5))};
  const auto c = compare_sides(a, b, 0.2);
  EXPECT_TRUE(c.ok());
  const auto& t = c.runs[0].timings[0];
  EXPECT_EQ(t.verdict, "same");
  ASSERT_EQ(t.a_invocations.size(), 2u);
  EXPECT_DOUBLE_EQ(t.a_invocations[0], 100.25);  // median of base_samples()
  EXPECT_NEAR(t.a_invocations[1], 140.35, 1e-9);
  ASSERT_EQ(t.b_invocations.size(), 2u);
  // median(145.3625, 150.375) / 140.35 - 1
  EXPECT_NEAR(t.invocation_change, 147.86875 / 140.35 - 1, 1e-12);
  EXPECT_GT(t.change, 0.2);
  EXPECT_LT(t.p_slower, 0.05);
  bool noted = false;
  for (const auto& n : c.runs[0].notes) noted |= n.find("between invocations") != std::string::npos;
  EXPECT_TRUE(noted);
  // The first file of each side alone is a regression: the rule above is what saves it.
  EXPECT_FALSE(compare_results(a[0], b[0], 0.2).ok());
}

TEST(CompareInvocations, SlowerThanEveryBaselineInvocationIsARegression) {
  const std::vector<ResultsFile> a{with_samples(base_samples(1.0)),
                                   with_samples(base_samples(1.1))};
  const std::vector<ResultsFile> b{with_samples(base_samples(2.0)), with_samples(base_samples(2.1)),
                                   with_samples(base_samples(1.9))};
  const auto c = compare_sides(a, b, 0.2);
  EXPECT_EQ(c.regressions(), 1);
  const auto& t = c.runs[0].timings[0];
  EXPECT_EQ(t.verdict, "slower");
  EXPECT_EQ(t.n_a, 20u);
  EXPECT_EQ(t.n_b, 30u);
  // B's median invocation is 2.0 x 100.25; A's slowest 1.1 x 100.25.
  EXPECT_NEAR(t.invocation_change, 2.0 / 1.1 - 1, 1e-12);
  // Reversed: faster than A's fastest invocation by more than the tolerance.
  const auto d = compare_sides(b, a, 0.2);
  EXPECT_TRUE(d.ok());
  EXPECT_EQ(d.runs[0].check(), "FASTER");
  EXPECT_NEAR(d.runs[0].timings[0].invocation_change, 1.05 / 1.9 - 1, 1e-12);
}

TEST(CompareInvocations, EachSidesProbeIsTheMedianOfItsInvocations) {
  // One busy invocation per side (probe 40 and 30) does not make a side busy: the medians
  // (100 vs 97) agree, and B, slower than every A invocation, fails.
  std::vector<ResultsFile> a{with_samples(base_samples(1.0)), with_samples(base_samples(1.1)),
                             with_samples(base_samples(1.05))};
  std::vector<ResultsFile> b{with_samples(base_samples(2.0)), with_samples(base_samples(2.1)),
                             with_samples(base_samples(1.9))};
  const double pa[] = {100, 40, 102}, pb[] = {97, 98, 30};
  for (std::size_t k = 0; k < 3; ++k) {
    a[k].provenance.sgemm_gflops = pa[k];
    b[k].provenance.sgemm_gflops = pb[k];
  }
  auto c = compare_sides(a, b, 0.2);
  EXPECT_FALSE(c.probe.disagree());
  EXPECT_EQ(c.regressions(), 1);
  // Two of B's three invocations busy: B's median probe 30 is far below A's 100.
  b[1].provenance.sgemm_gflops = 30;
  c = compare_sides(a, b, 0.2);
  EXPECT_TRUE(c.probe.disagree());
  EXPECT_EQ(c.regressions(), 0);
  EXPECT_EQ(c.unreliable(), 1);
  EXPECT_TRUE(c.ok());
}

TEST(CompareInvocations, EveryFurtherInvocationMustMatchDeterministically) {
  const auto a = with_samples(base_samples());
  auto a2 = a;
  a2.runs[0].collectives.bytes_per_rank_per_step[0] += 4;
  auto b2 = a;
  b2.runs.pop_back();  // the second run is missing in B's second invocation
  auto c = compare_sides({a, a2}, {a, b2}, 0.2);
  EXPECT_EQ(c.mismatches(), 2);
  ASSERT_FALSE(c.runs[0].mismatches.empty());
  EXPECT_EQ(c.runs[0].mismatches[0].rfind("A2 vs A: ", 0), 0u) << c.runs[0].mismatches[0];
  ASSERT_FALSE(c.runs[1].mismatches.empty());
  EXPECT_EQ(c.runs[1].mismatches[0], "B2: this run is missing");
  // A run only a further invocation has: the invocations were not of the same commands.
  auto b3 = a;
  b3.runs.push_back(b3.runs[0]);
  b3.runs.back().method = "fsdp-adamw";
  c = compare_sides({a}, {a, b3}, 0.2);
  ASSERT_EQ(c.extra_runs.size(), 1u);
  EXPECT_EQ(c.extra_runs[0].rfind("B2 run 2 has no partner in B: ", 0), 0u) << c.extra_runs[0];
  EXPECT_FALSE(c.ok());
  EXPECT_THROW(compare_sides({}, {a}, 0.2), InputError);
}

TEST(CompareInvocations, ARunNewInEveryCandidateInvocationIsNewNotAMismatch) {
  const auto a = with_samples(base_samples());
  auto b = a;
  b.runs.push_back(b.runs[0]);
  b.runs.back().method = "fsdp-adamw";
  auto c = compare_sides({a}, {b, b}, 0.2);
  EXPECT_EQ(c.only_b.size(), 1u);
  EXPECT_TRUE(c.extra_runs.empty());
  EXPECT_TRUE(c.ok());
  // A run missing from B, present in both A invocations: one MISSING, nothing extra.
  c = compare_sides({b, b}, {a}, 0.2);
  EXPECT_EQ(c.only_a.size(), 1u);
  EXPECT_TRUE(c.extra_runs.empty());
  EXPECT_EQ(c.mismatches(), 1);
}
