// The run description ranks compare (apps/common/run_agreement): its one-line encoding and the
// first difference the error names.

#include "common/run_agreement.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "dmuon/model/topology.hpp"

namespace {

using dmuon::apps::first_difference;
using dmuon::apps::RunDescription;

RunDescription lines(std::initializer_list<std::pair<const char*, const char*>> kv) {
  RunDescription d;
  for (const auto& [k, v] : kv) d.add(k, v);
  return d;
}

TEST(RunDescription, TextRoundTripsAndStaysOneLinePerEntry) {
  RunDescription d;
  d.add("steps", 3);
  d.add("name\nwith newline",
        "a\x1f"
        "b\\n");
  d.add("empty", "");
  const std::string t = d.text();
  EXPECT_EQ(std::count(t.begin(), t.end(), '\n'), 3);
  const auto back = RunDescription::from_text(t);
  EXPECT_EQ(back.lines(), d.lines());
  EXPECT_EQ(d.lines()[1].first, "name\\x0awith newline");
  EXPECT_EQ(d.lines()[1].second, "a\\x1fb\\\\n");
  // Escaping is one-to-one: a real backslash-n and a newline stay apart.
  RunDescription e;
  e.add("name\\x0awith newline", "a\\x1fb\\n");
  EXPECT_NE(e.text(), d.text());
}

TEST(FirstDifference, EqualDescriptionsHaveNone) {
  const auto a = lines({{"steps", "2"}, {"method", "dmuon"}});
  EXPECT_EQ(first_difference(a, a, 0), "");
  EXPECT_EQ(first_difference(RunDescription(), RunDescription(), 0), "");
}

TEST(FirstDifference, NamesTheKeyAndBothValues) {
  const auto mine = lines({{"method", "dmuon"}, {"steps", "3"}, {"prefetch", "0"}});
  const auto theirs = lines({{"method", "dmuon"}, {"steps", "2"}, {"prefetch", "1"}});
  EXPECT_EQ(first_difference(mine, theirs, 0), "steps = 3 (rank 0: 2)");
  EXPECT_EQ(first_difference(theirs, mine, 5), "steps = 2 (rank 5: 3)");
}

TEST(FirstDifference, DifferentKeysShowBothLines) {
  const auto mine = lines({{"a", "1"}, {"module 'x' type", "Linear"}});
  const auto theirs = lines({{"a", "1"}, {"module 'y' type", "Block"}});
  EXPECT_EQ(first_difference(mine, theirs, 0),
            "module 'x' type = Linear (rank 0: module 'y' type = Block)");
}

TEST(FirstDifference, AMissingLineReadsNone) {
  const auto shorter = lines({{"a", "1"}});
  const auto longer = lines({{"a", "1"}, {"b", "2"}});
  EXPECT_EQ(first_difference(longer, shorter, 0), "b = 2 (rank 0: (none))");
  EXPECT_EQ(first_difference(shorter, longer, 0), "b = (none) (rank 0: 2)");
}

TEST(DescribeTopology, NamesTheDimensionThatDiffers) {
  RunDescription a, b;
  dmuon::apps::describe_topology(dmuon::model::build_topology("moe", "tiny", {{"L", "2"}}), a);
  dmuon::apps::describe_topology(dmuon::model::build_topology("moe", "tiny", {{"L", "3"}}), b);
  EXPECT_EQ(first_difference(b, a, 0), "topology: dim L = 3 (rank 0: 2)");
}

// Trees built by hand: one shape, one tie and one module type apart.
dmuon::model::Topology small(std::int64_t rows, bool tie, const char* type) {
  dmuon::model::Topology t;
  t.name = "small";
  auto& tree = t.tree;
  const int embed = tree.add_module(dmuon::model::ModuleTree::root, "embed", "Embedding");
  const int head = tree.add_module(dmuon::model::ModuleTree::root, "head", type);
  const int w = tree.add_parameter(embed, "weight", {rows, 8});
  if (tie)
    tree.tie_parameter(head, "weight", w);
  else
    tree.add_parameter(head, "weight", {rows, 8});
  tree.finalize();
  return t;
}

std::string topology_difference(const dmuon::model::Topology& mine,
                                const dmuon::model::Topology& theirs) {
  RunDescription a, b;
  dmuon::apps::describe_topology(mine, a);
  dmuon::apps::describe_topology(theirs, b);
  return first_difference(a, b, 0);
}

TEST(DescribeTopology, NamesShapeTieAndType) {
  EXPECT_EQ(topology_difference(small(16, true, "Linear"), small(16, true, "Linear")), "");
  EXPECT_EQ(topology_difference(small(32, true, "Linear"), small(16, true, "Linear")),
            "topology: parameter 'embed.weight' shape = [32, 8] (rank 0: [16, 8])");
  // Untied: one more parameter, named by the count before any shifted line.
  EXPECT_EQ(topology_difference(small(16, false, "Linear"), small(16, true, "Linear")),
            "topology: parameters = 2 (rank 0: 1)");
  EXPECT_EQ(topology_difference(small(16, true, "Conv"), small(16, true, "Linear")),
            "topology: module 'head' type = Conv (rank 0: Linear)");
}

}  // namespace
