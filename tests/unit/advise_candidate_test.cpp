// The advisor's micro-batch and CP knobs (src/apps/advise/candidate.hpp): their values, the
// accum each pairs with (micro-batch x accum / C, the sequences per data-parallel rank and
// optimizer step, kept), and the options a candidate sets; and the step's tokens with
// --seq-len, --accum and --cp.

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>

#include "advise/candidate.hpp"
#include "dmuon/model/topology.hpp"
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

// dmuon_advise's options for llama3-8b on `world` ranks of `machine` and `args`.
RunOptions parse_advise(std::vector<std::string> args, const std::string& machine = "a800",
                        const std::string& world = "8") {
  RunOptions o;
  std::vector<std::string> argv = {"dmuon_advise", "--topology",   "llm",
                                   "--preset",     "llama3-8b",    "--machine",
                                   machine,        "--world-size", world};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> ptrs;
  for (auto& a : argv) ptrs.push_back(a.data());
  options::parse_tool_options(options::kAdvise, "test", static_cast<int>(ptrs.size()), ptrs.data(),
                              o, false);
  return o;
}

// `start` with knob `key` at `value`: one knob changed, paired with `accum`, shown as `shown`,
// flagged as `flags`, and each rank's tokens per step the start's.
advise::Candidate expect_paired(const RunOptions& base, const advise::Candidate& start,
                                const std::string& key, const std::string& value, int accum,
                                const std::string& shown, const std::string& flags) {
  const auto c = start.with(advise::knob(key), value);
  EXPECT_EQ(c.accum, accum);
  EXPECT_EQ(advise::changed_knobs(c, start), 1);
  EXPECT_EQ(advise::describe_changes(c, start), shown);
  EXPECT_EQ(advise::changed_flags(c, start), flags);
  const auto o = c.apply(base);
  EXPECT_EQ(o.engine.step.accum, accum);
  EXPECT_EQ(o.engine.step.tokens, base.engine.step.tokens);
  return c;
}

TEST(MicroBatchKnob, CandidatePairsAccumAndKeepsTheStepTokens) {
  const auto base = parse_advise({"--seq-len", "8192", "--micro-batch", "8", "--accum", "2"});
  EXPECT_EQ(base.engine.step.tokens, 8192 * 8 * 2);  // seq-len x micro-batch x accum
  const auto start = advise::candidate_of(base, "default");
  EXPECT_EQ(start.accum, 2);
  const std::size_t k = advise::knob("micro_batch");
  EXPECT_EQ(start.value(k), "8");
  // Micro-batch and accum: one knob.
  const auto c = expect_paired(base, start, "micro_batch", "2", 8, "micro_batch=2 (accum 8)",
                               "--micro-batch 2 --accum 8");
  EXPECT_EQ(c.apply(base).workload.micro_batch, 2);
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

using Sizes = std::vector<int>;

TEST(CpKnob, ValuesArePowersOfTwoThatSplitTheSequenceAndTheWorld) {
  // 8,192 tokens on 64 ranks: every power of two to 64 (2C = 128 divides 8,192).
  EXPECT_EQ(advise::cp_values(1, 1, 8192, 64, 1, false), (Sizes{1, 2, 4, 8, 16, 32, 64}));
  // 24 ranks: C x T must divide the world (16, 32, 64 do not).
  EXPECT_EQ(advise::cp_values(1, 1, 8192, 24, 1, false), (Sizes{1, 2, 4, 8}));
  // A sequence of 24 tokens: 2C divides 24 for C = 1, 2, 4 only (... 12 is no power of two).
  EXPECT_EQ(advise::cp_values(1, 1, 24, 64, 1, false), (Sizes{1, 2, 4}));
  // TP 4 with sequence parallelism: C x lcm(2, 4) = 4C must divide 48 (C = 1, 2, 4); C x 4
  // divides 32 ranks for C <= 8.
  EXPECT_EQ(advise::cp_values(1, 1, 48, 32, 4, true), (Sizes{1, 2, 4}));
  EXPECT_EQ(advise::cp_values(1, 1, 48, 32, 4, false), (Sizes{1, 2, 4, 8}));  // 2C | 48
}

TEST(CpKnob, AccumMustStayWholeAndInRange) {
  // From C = 4 at accum 2: C = 2 pairs with accum 1, C = 1 with 0.5 (left out), C = 8 with 4.
  EXPECT_EQ(advise::cp_values(4, 2, 8192, 64, 1, false), (Sizes{4, 2, 8, 16, 32, 64}));
  // At accum 512 only C <= 2 keeps accum <= 1024; the start first.
  EXPECT_EQ(advise::cp_values(1, 512, 8192, 64, 1, false), (Sizes{1, 2}));
}

TEST(CpKnob, CandidatePairsAccumAndKeepsEachRanksTokens) {
  const auto base =
      parse_advise({"--seq-len", "8192", "--micro-batch", "2", "--accum", "2"}, "h100-ndr", "64");
  EXPECT_EQ(base.engine.step.tokens, 8192 * 2 * 2);
  const auto start = advise::candidate_of(base, "default");
  const std::size_t k = advise::knob("cp"), mb = advise::knob("micro_batch");
  EXPECT_EQ(start.value(k), "1");
  // 4 ranks share each sequence: 4x the micro-steps, the same sequences; each rank's tokens
  // per step, 8,192 / 4 x 2 x 8, the start's.
  const auto c = expect_paired(base, start, "cp", "4", 8, "cp=4 (accum 8)", "--cp 4 --accum 8");
  EXPECT_EQ(c.apply(base).workload.cp, 4);
  // Both knobs moved: micro-batch 1 doubles the accum again, and --accum is named once.
  const auto both = c.with(mb, "1");
  EXPECT_EQ(both.accum, 16);
  EXPECT_EQ(advise::changed_flags(both, start), "--micro-batch 1 --cp 4 --accum 16");
  EXPECT_EQ(both.apply(base).engine.step.tokens, base.engine.step.tokens);
  EXPECT_EQ(c.with(k, "1").accum, 2);  // and back
  // From C = 4 at accum 8, C = 2 halves it; a flag list carries --cp only above 1.
  EXPECT_EQ(c.with(k, "2").accum, 4);
  const auto flags = advise::candidate_flags(c);
  EXPECT_NE(std::find(flags.begin(), flags.end(), "--cp=4"), flags.end());
  for (const auto& f : advise::candidate_flags(start)) EXPECT_NE(f.rfind("--cp", 0), 0u) << f;
}

TEST(CpKnob, NoWholeAccumIsALogicError) {
  const auto base =
      parse_advise({"--seq-len", "8192", "--micro-batch", "1", "--cp", "4"}, "h100-ndr", "64");
  const auto start = advise::candidate_of(base, "default");
  EXPECT_EQ(start.value("cp"), "4");
  EXPECT_THROW(start.with(advise::knob("cp"), "2"), std::logic_error);  // accum 1/2
}

// --ep: 1, the largest E inside one NVLink domain, the largest overall; each divides the
// world and every layer's experts.
TEST(EpKnob, OneTheDomainsLargestAndTheLargest) {
  using V = std::vector<std::string>;
  const auto deepseek = dmuon::model::build_topology("moe-llm", "deepseek-v3").tree;  // 256 experts
  EXPECT_EQ(advise::ep_values(deepseek, 2048, 8), (V{"1", "8", "256"}));
  EXPECT_EQ(advise::ep_values(deepseek, 256, 8), (V{"1", "8", "256"}));
  EXPECT_EQ(advise::ep_values(deepseek, 8, 8), (V{"1", "8"}));
  EXPECT_EQ(advise::ep_values(deepseek, 12, 8), (V{"1", "4"}));            // 12 and 256 share 4
  EXPECT_EQ(advise::ep_values(deepseek, 256, 72), (V{"1", "64", "256"}));  // an NVL72 rack
  const auto mixtral = dmuon::model::build_topology("moe-llm", "mixtral-8x7b").tree;  // 8 experts
  EXPECT_EQ(advise::ep_values(mixtral, 64, 8), (V{"1", "8"}));
  EXPECT_EQ(advise::ep_values(mixtral, 6, 8), (V{"1", "2"}));
  EXPECT_EQ(advise::ep_values(dmuon::model::build_topology("llm", "tiny").tree, 64, 8), (V{"1"}));
}

}  // namespace
