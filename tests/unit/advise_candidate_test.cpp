// The advisor's micro-batch knob (src/apps/advise/candidate.hpp): its values, the accum each
// pairs with (micro-batch x accum, the samples per rank and optimizer step, kept), and the
// options a candidate sets; and the step's tokens with --seq-len and --accum.

#include <gtest/gtest.h>

#include <stdexcept>

#include "advise/candidate.hpp"
#include "options/tool_options.hpp"

namespace {

using namespace dmuon::apps;

using Values = std::vector<std::int64_t>;

TEST(MicroBatchKnob, ValuesAreMHalfQuarterAndOneThatDivide) {
  EXPECT_EQ(advise::micro_batch_values(16, 1), (Values{16, 8, 4, 1}));
  EXPECT_EQ(advise::micro_batch_values(8, 1), (Values{8, 4, 2, 1}));
  EXPECT_EQ(advise::micro_batch_values(4, 1), (Values{4, 2, 1}));
  EXPECT_EQ(advise::micro_batch_values(2, 3), (Values{2, 1}));
  EXPECT_EQ(advise::micro_batch_values(6, 1), (Values{6, 3, 1}));  // 6/4 does not divide
  EXPECT_EQ(advise::micro_batch_values(3, 1), (Values{3, 1}));
  EXPECT_EQ(advise::micro_batch_values(12, 2), (Values{12, 6, 3, 1}));
}

TEST(MicroBatchKnob, OneSampleOrNoneHasNoOtherValue) {
  EXPECT_EQ(advise::micro_batch_values(1, 1), (Values{1}));
  EXPECT_EQ(advise::micro_batch_values(1, 8), (Values{1}));
  EXPECT_EQ(advise::micro_batch_values(0, 1), (Values{0}));  // no --seq-len
}

TEST(MicroBatchKnob, AccumStaysWithinItsRange) {
  // accum x m / value <= 1024: at accum 512, m 4 pairs 2 with 1024 and 1 with 2048 (left out).
  EXPECT_EQ(advise::micro_batch_values(4, 512), (Values{4, 2}));
  EXPECT_EQ(advise::micro_batch_values(4, 1024), (Values{4}));
}

// dmuon_advise's options for llama3-8b on 8 ranks of a800 and `args`.
RunOptions parse_advise(std::vector<std::string> args) {
  RunOptions o;
  std::vector<std::string> argv = {"dmuon_advise", "--topology",   "llm",
                                   "--preset",     "llama3-8b",    "--machine",
                                   "a800",         "--world-size", "8"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> ptrs;
  for (auto& a : argv) ptrs.push_back(a.data());
  options::parse_tool_options(options::kAdvise, "test", static_cast<int>(ptrs.size()), ptrs.data(),
                              o, false);
  return o;
}

TEST(MicroBatchKnob, CandidatePairsAccumAndKeepsTheStepTokens) {
  const auto base = parse_advise({"--seq-len", "8192", "--micro-batch", "8", "--accum", "2"});
  EXPECT_EQ(base.engine.step.tokens, 8192 * 8 * 2);  // seq-len x micro-batch x accum
  const auto start = advise::candidate_of(base, "default");
  EXPECT_EQ(start.accum, 2);
  const std::size_t k = advise::knob("micro_batch");
  EXPECT_EQ(start.value(k), "8");
  const auto c = start.with(k, "2");
  EXPECT_EQ(c.accum, 8);
  EXPECT_EQ(advise::changed_knobs(c, start), 1);  // micro-batch and accum: one knob
  EXPECT_EQ(advise::describe_changes(c, start), "micro_batch=2 (accum 8)");
  EXPECT_EQ(advise::changed_flags(c, start), "--micro-batch 2 --accum 8");
  const auto o = c.apply(base);
  EXPECT_EQ(o.workload.micro_batch, 2);
  EXPECT_EQ(o.engine.step.accum, 8);
  EXPECT_EQ(o.engine.step.tokens, base.engine.step.tokens);
  EXPECT_EQ(c.with(k, "8").accum, 2);  // and back
  EXPECT_NE(c.key(), start.key());
  EXPECT_THROW(start.with(k, "3"), std::logic_error);  // 3 does not divide 16 samples
}

TEST(MicroBatchKnob, WithoutSeqLenNoMicroBatchFlag) {
  const auto base = parse_advise({});
  const auto start = advise::candidate_of(base, "default");
  for (const auto& f : advise::candidate_flags(start)) {
    EXPECT_EQ(f.find("--micro-batch"), std::string::npos) << f;
    EXPECT_EQ(f.find("--accum"), std::string::npos) << f;
  }
  EXPECT_EQ(start.apply(base).workload.micro_batch, 0);
}

}  // namespace
