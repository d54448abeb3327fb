// One parser per kind of option value: every class of hostile input is refused once, by kind,
// with the one line "<flag> '<text>' is invalid (valid: ...)" (or an empty-value / looks-like-
// a-flag / too-long line), and what is valid reads back exactly.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "dmuon/base/error.hpp"
#include "options/option_parser.hpp"
#include "options/value_kind.hpp"

namespace {

using namespace dmuon::apps::options;
using dmuon::InputError;

// The message of the InputError `f` throws ("" when it throws none).
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(ValueKind, IntegerAcceptsDecimalInRange) {
  const Integer<int> k{1, 100000};
  EXPECT_EQ(k.parse("--steps", "1"), 1);
  EXPECT_EQ(k.parse("--steps", "100000"), 100000);
  EXPECT_EQ(k.parse("--steps", "007"), 7);  // leading zeros: decimal, not octal
  EXPECT_EQ((Integer<int>{-5, 5}.parse("--x", "-0")), 0);
  EXPECT_EQ((Integer<std::int64_t>{}.parse("--x", "-9223372036854775808")), INT64_MIN);
  EXPECT_EQ((Integer<std::uint64_t>{}.parse("--seed", "18446744073709551615")), UINT64_MAX);
}

TEST(ValueKind, IntegerRefusesEveryOtherText) {
  const Integer<int> k{1, 100000};
  for (const char* bad : {"0", "100001", "-1", "0x10", "+1", " 1", "1 ", "1e3", "1.0", "abc",
                          "2147483648", "99999999999999999999999"})
    EXPECT_EQ(error_of([&] { k.parse("--steps", bad); }),
              std::string("--steps '") + bad + "' is invalid (valid: an integer 1..100000)")
        << bad;
  EXPECT_EQ(error_of([&] { k.parse("--steps", ""); }),
            "--steps has an empty value (valid: an integer 1..100000)");
  EXPECT_NE(error_of([&] { k.parse("--steps", "--check"); }).find("looks like a flag"),
            std::string::npos);
  EXPECT_NE(error_of([&] { k.parse("--steps", std::string(1000, '9')); }).find("too long"),
            std::string::npos);
  EXPECT_NE(error_of([&] { Integer<std::uint64_t>{}.parse("--seed", "-1"); }), "");
  EXPECT_NE(error_of([&] { Integer<std::uint64_t>{}.parse("--seed", "18446744073709551616"); }),
            "");
  EXPECT_NE(error_of([&] { Integer<std::int64_t>{}.parse("--x", "9223372036854775808"); }), "");
}

TEST(ValueKind, RealIsFiniteDecimalInRange) {
  const Real open{0, 1e30, true};
  EXPECT_DOUBLE_EQ(open.parse("--clip-norm", "1.5"), 1.5);
  EXPECT_DOUBLE_EQ(open.parse("--clip-norm", "2e-3"), 2e-3);
  for (const char* bad : {"0", "-1", "nan", "inf", "-inf", "1e400", "0x1p3", " 1", "1,5", "1e31"})
    EXPECT_NE(error_of([&] { open.parse("--clip-norm", bad); }).find("is invalid (valid: a finite"),
              std::string::npos)
        << bad;
  const Real closed{0, 1, false};
  EXPECT_DOUBLE_EQ(closed.parse("--check-tolerance", "0"), 0.0);
  EXPECT_NE(error_of([&] { closed.parse("--check-tolerance", "1.5"); }), "");
}

TEST(ValueKind, ChoiceNamesTheValidOnes) {
  enum class E { a, b };
  Choice<E> c;
  c.names = {{E::a, "z3"}, {E::b, "z2"}};
  c.aliases = {{E::b, "zero-2"}};
  EXPECT_EQ(c.parse("--reshard", "z2"), E::b);
  EXPECT_EQ(c.parse("--reshard", "zero-2"), E::b);
  EXPECT_EQ(c.text(E::b), "z2");  // an alias is accepted, never written
  EXPECT_EQ(error_of([&] { c.parse("--reshard", "Z3"); }),
            "--reshard 'Z3' is invalid (valid: z3, z2)");
  EXPECT_EQ(error_of([&] { c.parse("--reshard", ""); }),
            "--reshard has an empty value (valid: z3, z2)");
}

TEST(ValueKind, TextRefusesWhatNoValueCanBe) {
  const Text t{"a path"};
  EXPECT_EQ(t.parse("--output", "a b/c.h5"), "a b/c.h5");
  EXPECT_EQ(error_of([&] { t.parse("--output", ""); }),
            "--output has an empty value (valid: a path)");
  EXPECT_NE(error_of([&] { t.parse("--output", "--check"); }).find("looks like a flag"),
            std::string::npos);
  EXPECT_NE(error_of([&] { t.parse("--output", std::string("a\0b", 3)); }), "");
  EXPECT_NE(error_of([&] { t.parse("--output", "a\nb"); }), "");
  EXPECT_NE(error_of([&] { t.parse("--output", std::string(5000, 'x')); }).find("too long"),
            std::string::npos);
}

TEST(ValueKind, IntegerOrWordAndOptional) {
  const IntegerOr<int> ranks{{0, 255}, "all", -1};
  EXPECT_EQ(ranks.parse("--trace-ranks", "all"), -1);
  EXPECT_EQ(ranks.parse("--trace-ranks", "3"), 3);
  EXPECT_EQ(ranks.text(-1), "all");
  EXPECT_NE(error_of([&] { ranks.parse("--trace-ranks", "-1"); }).find("or all"),
            std::string::npos);
  const Optional<Integer<int>> o{{1, 4}};
  EXPECT_EQ(o.text(std::nullopt), "");
  EXPECT_EQ(o.text(3), "3");
}

TEST(ValueKind, CommaListsAndSwitches) {
  EXPECT_EQ(comma_items("--method", "a,b"), (std::vector<std::string>{"a", "b"}));
  for (const char* bad : {"a,,b", "a,", ",b", ""})
    EXPECT_NE(error_of([&] { comma_items("--method", bad); }).find("empty item"), std::string::npos)
        << bad;
  EXPECT_TRUE(switch_on("--check", {"true"}));
  EXPECT_TRUE(switch_on("--check", {}));
  EXPECT_FALSE(switch_on("--check", {"false"}));
  EXPECT_EQ(error_of([&] { switch_on("--check", {"maybe"}); }),
            "--check=maybe is invalid (a switch: give --check alone, or true/false in a config)");
}

}  // namespace
