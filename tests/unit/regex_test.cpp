// User regular expressions (boundary paths:/resolver:, dedication regex:) are RE2: matching is
// linear in the subject whatever the pattern, and patterns are bounded in length. A
// backtracking engine (std::regex) takes time exponential in the path length on
// `(\w+\.?)+experts\.\d+` and overflows its stack on deep nesting; these cases must finish
// (the CTest timeout is the hang detector; nothing here is timed).

#include <gtest/gtest.h>

#include <string>

#include "dmuon/base/error.hpp"
#include "dmuon/boundary/boundary_policy.hpp"
#include "dmuon/boundary/dedication.hpp"
#include "dmuon/boundary/hook_plan.hpp"
#include "dmuon/boundary/regex.hpp"
#include "dmuon/model/module_tree.hpp"
#include "input_error_message.hpp"

namespace {

using namespace dmuon;
using boundary::BoundaryPolicy;
using boundary::Regex;

using test::input_error_message;

const char* kPathological = R"((\w+\.?)+experts\.\d+)";

// "a0.a1. ... .a59.mlp": 60 segments, no "experts": the worst case for backtracking.
std::string long_path() {
  std::string s;
  for (int i = 0; i < 60; ++i) s += "seg" + std::to_string(i) + ".";
  return s + "mlp";
}

TEST(Regex, FullMatchSemantics) {
  const Regex re(R"(layers\.\d+)", "test");
  EXPECT_TRUE(re.full_match("layers.12"));
  EXPECT_FALSE(re.full_match("layers.12.mlp"));  // whole subject, not a prefix
  EXPECT_FALSE(re.full_match("model.layers.1"));
  EXPECT_TRUE(Regex("", "test").full_match(""));  // the root's path
}

TEST(Regex, NestedQuantifiersAnswerAtOnce) {
  const Regex re(kPathological, "test");
  EXPECT_TRUE(re.full_match("layers.0.experts.3"));
  EXPECT_FALSE(re.full_match(long_path()));
  EXPECT_FALSE(re.full_match(std::string(100000, 'a') + "."));
}

TEST(Regex, PathologicalPatternInEveryUserRegex) {
  // A module path of 60 segments, with an Expert below it: paths: matches only the experts.
  model::ModuleTree tree("M");
  int m = 0;
  for (int i = 0; i < 60; ++i) m = tree.add_module(m, "seg" + std::to_string(i), "Block");
  const int mlp = tree.add_module(m, "mlp", "Mlp");
  const int experts = tree.add_module(mlp, "experts", "ModuleList");
  tree.add_linear(tree.add_module(experts, "0", "Expert"), "fc", 4, 4);
  tree.add_linear(mlp, "proj", 4, 4);
  tree.finalize();
  const std::vector<int> ded{0, 1};
  auto paths = boundary::resolve_hook_plan(
      tree, ded, BoundaryPolicy::parse(std::string("paths:") + kPathological, false));
  ASSERT_EQ(paths.sites.size(), 2u);
  EXPECT_EQ(paths.sites[0].path, long_path() + ".experts.0");
  EXPECT_EQ(paths.reason[1], boundary::SiteReason::lenient_fallback);  // proj: no match
  auto resolver = boundary::resolve_hook_plan(
      tree, ded,
      BoundaryPolicy::parse(std::string("resolver:") + kPathological + R"(\..*=)" + long_path(),
                            false));
  EXPECT_EQ(resolver.sites[0].path, long_path());
  auto rule = boundary::DedicationRule::parse(std::string("regex:") + kPathological + ".*");
  EXPECT_EQ(boundary::select_dedicated(tree, rule), (std::vector<int>{0}));
}

TEST(Regex, UnsupportedSyntaxIsOneLineBadInput) {
  // RE2 has no lookaround and no backreferences: refused at parse time, naming the pattern.
  const auto look = input_error_message([] { BoundaryPolicy::parse("paths:(?=layers).*"); });
  EXPECT_NE(look.find("bad regex '(?=layers).*'"), std::string::npos) << look;
  const auto back = input_error_message([] { boundary::DedicationRule::parse(R"(regex:(a)\1)"); });
  EXPECT_NE(back.find("bad regex"), std::string::npos) << back;
  EXPECT_NE(input_error_message([] { BoundaryPolicy::parse("paths:("); }).find("bad regex '('"),
            std::string::npos);
  EXPECT_NE(input_error_message([] { BoundaryPolicy::parse("paths:a{1001}"); }).find("bad regex"),
            std::string::npos);
}

TEST(Regex, LengthLimits) {
  // 20,000 nested parentheses: 40,001 characters, over the 4096 limit; the message quotes the
  // pattern cut short (one readable line).
  const std::string deep = std::string(20000, '(') + "a" + std::string(20000, ')');
  const auto msg = input_error_message([&] { BoundaryPolicy::parse("paths:" + deep); });
  EXPECT_NE(msg.find("longer than 4096 characters"), std::string::npos) << msg.substr(0, 300);
  EXPECT_LT(msg.size(), 400u);
  EXPECT_EQ(msg.find('\n'), std::string::npos);
  // 1,000 levels fit in the limit and compile (RE2's parser keeps its stack on the heap).
  const std::string ok = std::string(1000, '(') + "a" + std::string(1000, ')');
  EXPECT_TRUE(Regex(ok, "test").full_match("a"));
  EXPECT_NO_THROW(Regex(std::string(boundary::kMaxRegexLength, 'a'), "test"));
  EXPECT_THROW(Regex(std::string(boundary::kMaxRegexLength + 1, 'a'), "test"), InputError);
  // Whole specs and rule lists are bounded too.
  EXPECT_THROW(BoundaryPolicy::parse("types:" + std::string(boundary::kMaxBoundarySpecLength, 'A')),
               InputError);
  std::string rules = "resolver:";
  for (std::size_t i = 0; i <= boundary::kMaxResolverRules; ++i) rules += "a=b;";
  EXPECT_NE(input_error_message([&] {
              BoundaryPolicy::parse(rules);
            }).find("more than 4096 resolver rules"),
            std::string::npos);
  EXPECT_THROW(boundary::DedicationRule::parse(
                   "contains:" + std::string(boundary::kMaxDedicationRuleLength, 'x')),
               InputError);
}

}  // namespace
