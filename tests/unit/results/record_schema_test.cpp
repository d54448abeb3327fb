// The results schema's tables: the match key they build (the exact text dmuon_compare printed
// before the tables existed), the stored channel names, and the summary's stored types.

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

#include "dmuon/comm/bus_bandwidth.hpp"
#include "dmuon/results/channel.hpp"
#include "dmuon/results/compare.hpp"
#include "dmuon/results/record_schema.hpp"
#include "dmuon/results/summary_fields.hpp"

namespace {

using namespace dmuon;
using namespace dmuon::results;

TEST(RecordSchema, KeyOfARunIsTheKnownText) {
  RunRecord r;  // defaults: what a file without the optional fields means
  r.topology = "moe";
  r.preset = "tiny";
  r.dedicate_rule = "contains:proj";
  r.boundary_spec = "types:Expert";
  r.strict = false;
  r.method = "dmuon";
  r.partition.strategy = "lpt";
  r.partition.cost_model = "optimizer";
  r.world_size = 8;
  r.replicate = 2;
  r.seed = 7;
  EXPECT_EQ(run_key(r),
            "topology=moe preset=tiny set=- dedicate=contains:proj boundary=types:Expert "
            "(lenient) method=dmuon owners=lpt cost=optimizer plan=- options=- reshard=z3 "
            "grad_reduce=per-param prefetch=0 device=host comm=fp32 reduce=fp32 ns=direct/fp32 "
            "pipeline=all-then-publish clip=none accum=1 compute=gemm batch=? steps=? warmup=? "
            "seed=7 world=8 R=2 T=1");
  r.boundary_spec.clear();  // a baseline: no boundary
  r.preset.clear();
  EXPECT_NE(run_key(r).find("preset=- "), std::string::npos) << run_key(r);
  EXPECT_NE(run_key(r).find("boundary=- "), std::string::npos) << run_key(r);
  r.run_options = "seq_len=2048 micro_batch=2 ac=full";  // the option table's run fragments
  EXPECT_NE(run_key(r).find("options=seq_len=2048 micro_batch=2 ac=full "), std::string::npos)
      << run_key(r);
}

TEST(RecordSchema, FieldNamesAreUniquePerGroupAndKeyLabelsUnique) {
  std::set<std::string> stored, keys;
  for (const auto& f : run_fields()) {
    EXPECT_TRUE(stored.insert(std::string(f.group) + "/" + f.name).second) << f.name;
    if (f.key) {
      EXPECT_TRUE(keys.insert(f.key).second) << f.key;
    }
  }
  EXPECT_EQ(keys.size(), 28u);  // the key's fields: every input that changes a number
  std::set<std::string> prov;
  for (const auto& f : provenance_fields()) EXPECT_TRUE(prov.insert(f.name).second) << f.name;
}

TEST(Channel, StoredNamesParseToTheirGroupAndKind) {
  const auto bcast = parse_channel("broadcast");
  ASSERT_TRUE(bcast);
  EXPECT_EQ(bcast->group, CommGroup::shard);
  EXPECT_EQ(bcast->kind, comm::CollectiveKind::broadcast);
  const auto stage2 = parse_channel("replicate_reduce");
  ASSERT_TRUE(stage2);
  EXPECT_EQ(stage2->group, CommGroup::replicate);
  EXPECT_EQ(stage2->kind, comm::CollectiveKind::reduce);
  const auto norm = parse_channel("world_all_reduce");
  ASSERT_TRUE(norm);
  EXPECT_EQ(norm->group, CommGroup::world);
  EXPECT_EQ(norm->kind, comm::CollectiveKind::all_reduce);
  const auto tp = parse_channel("tp_gather");  // the prefix the old bus-factor parse forgot
  ASSERT_TRUE(tp);
  EXPECT_EQ(tp->group, CommGroup::tp);
  EXPECT_EQ(tp->kind, comm::CollectiveKind::gather);
  EXPECT_FALSE(parse_channel("shard_broadcast"));
  EXPECT_FALSE(parse_channel("replicate_"));
  EXPECT_FALSE(parse_channel(""));
  for (const CommGroup g : kAllCommGroups)
    for (const comm::CollectiveKind k : comm::kAllCollectiveKinds) {
      const auto back = parse_channel(channel_text({g, k}));
      ASSERT_TRUE(back) << channel_text({g, k});
      EXPECT_EQ(back->group, g);
      EXPECT_EQ(back->kind, k);
    }
}

TEST(SummaryFields, CountsAreTheInt64Ones) {
  for (const char* name :
       {"hook_sites", "hook_calls_per_step", "hook_calls_formula", "audit_ok", "check_passed",
        "dedicated_bytes", "bytes_per_rank_max", "formula_bytes_per_rank_max", "idle_slots"})
    EXPECT_TRUE(is_count_summary(name)) << name;
  // Stored as float64 in every file so far.
  for (const char* name : {"step_ms", "hooks_communicating_per_step", "max_rel_error",
                           "memory_measured_peak_bytes", "tokens_per_s"})
    EXPECT_FALSE(is_count_summary(name)) << name;
  std::set<std::string> names;
  for (const auto& f : summary_fields()) EXPECT_TRUE(names.insert(f.name).second) << f.name;
}

}  // namespace
