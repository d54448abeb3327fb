// Hook-site resolution (SPEC §3) against counts derived by hand from the topology structures
// in the issue text, plus the strict/lenient, tied and resolver rules.

#include <gtest/gtest.h>

#include <string>

#include "dmuon/base/error.hpp"
#include "dmuon/boundary/dedication.hpp"
#include "dmuon/boundary/degradation.hpp"
#include "dmuon/boundary/hook_plan.hpp"
#include "dmuon/model/topology.hpp"

namespace {

using namespace dmuon;
using boundary::BoundaryPolicy;

struct Resolved {
  model::Topology topo;
  boundary::HookPlan plan;
};

Resolved resolve(const std::string& topo, const std::string& boundary, bool strict = true,
                 std::vector<std::pair<std::string, std::string>> sets = {}) {
  Resolved r{model::build_topology(topo, "tiny", sets), {}};
  auto rule = boundary::DedicationRule::parse(r.topo.dedicate_rule);
  auto dedicated = boundary::select_dedicated(r.topo.tree, rule);
  r.plan =
      boundary::resolve_hook_plan(r.topo.tree, dedicated, BoundaryPolicy::parse(boundary, strict));
  return r;
}

std::size_t sites(const std::string& topo, const std::string& boundary, bool strict = true) {
  return resolve(topo, boundary, strict).plan.sites.size();
}

std::string strict_error(const std::string& topo, const std::string& boundary) {
  try {
    resolve(topo, boundary, true);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// Dedicated counts: vla tiny 4 ViT blocks x 4 + 4 decoder layers x 5 + 2 head = 38;
// moe tiny 4 layers x (8 experts x 2 + o_proj) = 68; nested tiny 4x7 + 4x4 + 2x6 = 56;
// llm tiny 4 x 7 = 28; sequential 2.
TEST(Boundary, DedicatedCounts) {
  EXPECT_EQ(resolve("sequential", "default").plan.dedicated.size(), 2u);
  EXPECT_EQ(resolve("vla", "default").plan.dedicated.size(), 38u);
  EXPECT_EQ(resolve("moe", "default").plan.dedicated.size(), 68u);
  EXPECT_EQ(resolve("nested", "default").plan.dedicated.size(), 56u);
  EXPECT_EQ(resolve("llm", "default").plan.dedicated.size(), 28u);
}

TEST(Boundary, DefaultHeuristicSiteCounts) {
  EXPECT_EQ(sites("sequential", "default"), 2u);  // per-Linear: 0, 2
  EXPECT_EQ(sites("vla", "default"), 10u);        // 4 visual.blocks.N + 4 layers.N + fc1 + fc2
  EXPECT_EQ(sites("moe", "default"), 4u);         // layers.N swallows router + experts
  EXPECT_EQ(sites("nested", "default"), 2u);      // outer layers.0 and layers.1
  EXPECT_EQ(sites("llm", "default"), 4u);         // model.layers.N
}

TEST(Boundary, RecommendedSiteCounts) {
  EXPECT_EQ(sites("vla", "types:VisionTower,DecoderLayer,ActionHead"), 6u);  // 1 + 4 + 1
  EXPECT_EQ(sites("moe", "types:Expert,MoELayer"), 36u);                     // 4 x (8 + 1)
  EXPECT_EQ(sites("nested", "types:Qwen2VLDecoderLayer,Qwen2VLVisionBlock,ExpertLayer"), 10u);
  EXPECT_EQ(sites("llm", "types:LlamaDecoderLayer"), 4u);
}

TEST(Boundary, IncompleteLenientSiteCounts) {
  EXPECT_EQ(sites("vla", "types:VisionTower,DecoderLayer", false), 7u);  // + fc1, fc2
  EXPECT_EQ(sites("moe", "types:Expert", false), 36u);                   // o_proj per Linear
  EXPECT_EQ(sites("nested", "types:Qwen2VLDecoderLayer,Qwen2VLVisionBlock", false), 20u);  // 8 + 12
}

TEST(Boundary, IncompleteStrictNamesParameterShapeAndParent) {
  const auto vla = strict_error("vla", "types:VisionTower,DecoderLayer");
  EXPECT_NE(vla.find("no ancestor matched"), std::string::npos) << vla;
  EXPECT_NE(vla.find("action_head.fc1.weight"), std::string::npos) << vla;
  EXPECT_NE(vla.find("[128, 128]"), std::string::npos) << vla;
  EXPECT_NE(vla.find("parent 'action_head.fc1'"), std::string::npos) << vla;
  const auto moe = strict_error("moe", "types:Expert");
  EXPECT_NE(moe.find("layers.0.o_proj.weight"), std::string::npos) << moe;
  const auto nested = strict_error("nested", "types:Qwen2VLDecoderLayer,Qwen2VLVisionBlock");
  EXPECT_NE(nested.find("layers.1.layers.0.q_proj.weight"), std::string::npos) << nested;
}

TEST(Boundary, PredicateMatchingEverythingGivesOneSitePerParentNotRoot) {
  // SPEC §3: a predicate matching every module yields one site per direct parent.
  EXPECT_EQ(sites("moe", "paths:.*"), 68u);
  // Only a predicate matching the root alone collapses everything.
  auto r = resolve("moe", "paths:");
  ASSERT_EQ(r.plan.sites.size(), 1u);
  EXPECT_EQ(r.plan.sites[0].path, "");
}

TEST(Boundary, SitesInModulePreOrderAndParamsInModelOrder) {
  auto r = resolve("vla", "default");
  const auto& s = r.plan.sites;
  EXPECT_EQ(s.front().path, "visual.blocks.0");
  EXPECT_EQ(s[4].path, "layers.0");
  EXPECT_EQ(s[8].path, "action_head.fc1");
  EXPECT_EQ(s[9].path, "action_head.fc2");
  const auto& p0 = s.front().params;
  ASSERT_EQ(p0.size(), 4u);
  EXPECT_EQ(r.topo.tree.parameter(p0[0]).name, "visual.blocks.0.attn.qkv.weight");
  EXPECT_EQ(r.topo.tree.parameter(p0[3]).name, "visual.blocks.0.mlp.fc2.weight");
}

TEST(Boundary, EveryDedicatedParameterHasExactlyOneSite) {
  for (const char* t : {"sequential", "vla", "moe", "nested", "llm", "moe-llm"}) {
    auto r = resolve(t, "default");
    std::vector<int> seen(r.topo.tree.num_parameters(), 0);
    for (const auto& s : r.plan.sites)
      for (int p : s.params) ++seen[p];
    for (int p : r.plan.dedicated)
      EXPECT_EQ(seen[p], 1) << t << " " << r.topo.tree.parameter(p).name;
    std::size_t total = 0;
    for (const auto& s : r.plan.sites) total += s.params.size();
    EXPECT_EQ(total, r.plan.dedicated.size()) << t;
  }
}

TEST(Boundary, TiedParameterGoesToLowestCommonAncestor) {
  // llm tiny with tied embeddings: model.embed_tokens and lm_head hold one parameter, the
  // only common ancestor is the root; it is partitioned once under its first name.
  model::ModuleTree tree("M");
  const int a = tree.add_module(0, "a", "A");
  const int a1 = tree.add_module(a, "x", "Linear");
  const int a2 = tree.add_module(a, "y", "Linear");
  const int p = tree.add_parameter(a1, "weight", {4, 4});
  tree.tie_parameter(a2, "weight", p);
  const int q = tree.add_parameter(a2, "bias2d", {4, 4});
  tree.finalize();
  auto rule = boundary::DedicationRule::parse("ndim=2");
  auto ded = boundary::select_dedicated(tree, rule);
  ASSERT_EQ(ded.size(), 2u);  // tied counted once
  auto plan = boundary::resolve_hook_plan(tree, ded, BoundaryPolicy::parse("default"));
  EXPECT_EQ(plan.sites[plan.site_of_param[p]].path, "a");
  EXPECT_EQ(plan.reason[p], boundary::SiteReason::tied);
  EXPECT_EQ(plan.sites[plan.site_of_param[q]].path, "a.y");
  EXPECT_EQ(tree.parameter(p).name, "a.x.weight");

  auto llm = model::build_topology("llm", "tiny", {{"tie_embeddings", "1"}});
  auto all = boundary::select_dedicated(llm.tree, boundary::DedicationRule::parse("ndim=2"));
  auto lp = boundary::resolve_hook_plan(llm.tree, all, BoundaryPolicy::parse("default"));
  auto emb = llm.tree.find_parameter("model.embed_tokens.weight");
  ASSERT_TRUE(emb.has_value());
  EXPECT_EQ(lp.sites[lp.site_of_param[*emb]].path, "");
  EXPECT_FALSE(llm.tree.find_parameter("lm_head.weight").has_value());
}

TEST(Boundary, ResolverMayReturnNonAncestorsAndNoneIsStrictError) {
  auto r = resolve("moe",
                   "resolver:layers\\.(\\d+)\\.experts\\..*=layers.0.experts;.*o_proj.*=layers.3");
  EXPECT_EQ(r.plan.sites.size(), 2u);  // layers.0.experts and layers.3 (non-ancestors allowed)
  EXPECT_EQ(r.plan.sites[0].path, "layers.0.experts");
  EXPECT_EQ(r.plan.sites[0].params.size(), 64u);
  EXPECT_THROW(resolve("moe", "resolver:.*experts.*=layers.0"), InputError);
  auto lenient = resolve("moe", "resolver:.*experts.*=layers.0", false);
  EXPECT_EQ(lenient.plan.sites.size(), 5u);  // layers.0 + 4 o_proj fallbacks
  EXPECT_THROW(resolve("moe", "resolver:.*=no.such.module"), InputError);
}

TEST(Boundary, BadPolicySpecs) {
  EXPECT_THROW(BoundaryPolicy::parse("layers"), InputError);
  EXPECT_THROW(BoundaryPolicy::parse("types:"), InputError);
  EXPECT_THROW(BoundaryPolicy::parse("types:A,,B"), InputError);
  EXPECT_THROW(BoundaryPolicy::parse("paths:("), InputError);
  EXPECT_THROW(BoundaryPolicy::parse("resolver:abc"), InputError);
  try {
    BoundaryPolicy::parse("blocks");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'blocks'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("types:"), std::string::npos);
  }
}

TEST(Dedication, RulesAndErrors) {
  auto t = model::build_topology("moe", "tiny");
  auto n = [&](const char* rule) {
    return boundary::select_dedicated(t.tree, boundary::DedicationRule::parse(rule)).size();
  };
  EXPECT_EQ(n("ndim=2"), 72u);  // 68 + 4 routers
  EXPECT_EQ(n("ndim=2&excludes:router"), 68u);
  EXPECT_EQ(n("contains:proj"), 68u);
  EXPECT_EQ(n("regex:layers\\.0\\..*"), 17u + 1u);
  EXPECT_EQ(n("all"), 72u);
  EXPECT_THROW(boundary::DedicationRule::parse("ndim=x"), InputError);
  EXPECT_THROW(boundary::DedicationRule::parse("shape:2"), InputError);
  EXPECT_THROW(boundary::DedicationRule::parse("regex:("), InputError);
  EXPECT_THROW(boundary::DedicationRule::parse(""), InputError);
  try {
    boundary::select_dedicated(t.tree, boundary::DedicationRule::parse("contains:nothing_here"));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("contains:nothing_here"), std::string::npos);
  }
  EXPECT_TRUE(
      boundary::select_dedicated(t.tree, boundary::DedicationRule::parse("contains:zz"), true)
          .empty());
}

// ---- degradation report ----------------------------------------------------------------

boundary::DegradationReport analyse(const std::string& topo, const std::string& b,
                                    bool strict = true) {
  auto r = resolve(topo, b, strict);
  return boundary::analyse_degradations(r.topo.tree, r.plan, BoundaryPolicy::parse(b, strict));
}

int count(const boundary::DegradationReport& rep, boundary::FindingKind k) {
  int n = 0;
  for (const auto& f : rep.findings) n += f.kind == k;
  return n;
}

TEST(Degradation, FlatSequentialIsHealthy) {
  auto rep = analyse("sequential", "default");
  EXPECT_TRUE(rep.findings.empty());
  EXPECT_TRUE(rep.suggested_boundary.empty());
}

TEST(Degradation, VlaActionHeadPerLinearFallback) {
  auto rep = analyse("vla", "default");
  ASSERT_EQ(count(rep, boundary::FindingKind::per_linear_fallback), 1);
  const auto& f = rep.findings.front();
  EXPECT_EQ(f.site, "action_head");
  EXPECT_EQ(f.paths, (std::vector<std::string>{"action_head.fc1", "action_head.fc2"}));
  EXPECT_EQ(rep.suggested_boundary, "types:VitBlock,DecoderLayer,ActionHead");
  EXPECT_EQ(rep.suggested_sites, 9);  // 4 + 4 + 1
}

TEST(Degradation, MoeLayerSwallowsExperts) {
  auto rep = analyse("moe", "default");
  EXPECT_EQ(count(rep, boundary::FindingKind::swallowed_repeats), 4);
  EXPECT_EQ(rep.findings.front().paths.size(), 8u);
  EXPECT_EQ(rep.suggested_boundary, "types:Expert,MoELayer");
  EXPECT_EQ(rep.suggested_sites, 36);
  // The recommended boundary is healthy.
  EXPECT_EQ(analyse("moe", "types:Expert,MoELayer").warnings(), 0);
}

// A plain GPT: h = ModuleList of 2 Blocks, each with attn (c_attn, c_proj) and an MLP
// Sequential(Linear, GELU, Linear); plus `experts`, a ModuleList of 3 bare Linear experts.
model::ModuleTree gpt_tree() {
  model::ModuleTree tree("GPT");
  const int h = tree.add_module(0, "h", "ModuleList");
  for (int b = 0; b < 2; ++b) {
    const int block = tree.add_module(h, std::to_string(b), "Block");
    const int attn = tree.add_module(block, "attn", "Attention");
    tree.add_parameter(tree.add_module(attn, "c_attn", "Linear"), "weight", {48, 16});
    tree.add_parameter(tree.add_module(attn, "c_proj", "Linear"), "weight", {16, 16});
    const int mlp = tree.add_module(block, "mlp", "Sequential");
    tree.add_parameter(tree.add_module(mlp, "0", "Linear"), "weight", {64, 16});
    tree.add_module(mlp, "1", "GELU");
    tree.add_parameter(tree.add_module(mlp, "2", "Linear"), "weight", {16, 64});
  }
  const int experts = tree.add_module(0, "experts", "ModuleList");
  for (int e = 0; e < 3; ++e)
    tree.add_parameter(tree.add_module(experts, std::to_string(e), "Linear"), "weight", {8, 8});
  tree.finalize();
  return tree;
}

TEST(Degradation, MlpSequentialIsNotSwallowedRepeats) {
  const auto tree = gpt_tree();
  const auto ded = boundary::select_dedicated(tree, boundary::DedicationRule::parse("ndim=2"));
  const auto policy = BoundaryPolicy::parse("types:Block,ModuleList", true);
  const auto plan = boundary::resolve_hook_plan(tree, ded, policy);
  const auto rep = boundary::analyse_degradations(tree, plan, policy);
  // Sites: h.0, h.1 (each holding its MLP's two Linears: a pipeline, not repeats) and
  // `experts`, which does swallow 3 repeats (bare Linears).
  int swallowed = 0;
  for (const auto& f : rep.findings)
    if (f.kind == boundary::FindingKind::swallowed_repeats) {
      ++swallowed;
      EXPECT_EQ(f.site, "experts") << f.message;
    }
  EXPECT_EQ(swallowed, 1);
  // The experts are leaves: suggesting types:Linear would be per-Linear hooks, the very
  // degradation the findings warn about.
  EXPECT_EQ(rep.suggested_boundary.find("Linear"), std::string::npos) << rep.suggested_boundary;
}

TEST(Degradation, NestedOuterLayersPitfall) {
  auto rep = analyse("nested", "default");
  EXPECT_EQ(count(rep, boundary::FindingKind::swallowed_repeats), 3);  // decoder, vision, expert
  EXPECT_EQ(rep.suggested_boundary, "types:Qwen2VLDecoderLayer,Qwen2VLVisionBlock,ExpertLayer");
  EXPECT_EQ(rep.suggested_sites, 10);
}

TEST(Degradation, ExplicitCoarseChoiceIsANoteNotAWarning) {
  auto rep = analyse("vla", "types:VisionTower,DecoderLayer,ActionHead");
  EXPECT_EQ(rep.warnings(), 0);
  EXPECT_EQ(count(rep, boundary::FindingKind::swallowed_repeats),
            1);  // visual swallows 4 VitBlocks
}

TEST(Degradation, LenientFallbacksAndTyposAreReported) {
  auto rep = analyse("moe", "types:Expertt,MoELayer", false);
  ASSERT_GE(count(rep, boundary::FindingKind::unknown_type), 1);
  bool did_you_mean = false;
  for (const auto& f : rep.findings)
    if (f.kind == boundary::FindingKind::unknown_type)
      did_you_mean = f.message.find("did you mean 'Expert'") != std::string::npos;
  EXPECT_TRUE(did_you_mean);
  auto len = analyse("moe", "types:Expert", false);
  ASSERT_EQ(count(len, boundary::FindingKind::lenient_fallback), 1);
  EXPECT_EQ(len.findings.front().paths.size(), 4u);  // the four o_proj weights
  EXPECT_EQ(len.suggested_boundary, "types:Expert,MoELayer");
}

TEST(Degradation, RootCollapse) {
  auto rep = analyse("moe", "paths:");
  EXPECT_EQ(count(rep, boundary::FindingKind::root_collapse), 1);
}

}  // namespace

namespace {

// Warnings without a suggestion say why: moe-llm with every matrix dedicated (the embeddings
// and the head too) under the default boundary swallows the experts (warnings), but a types:
// boundary of the layer and expert types leaves the embedding (held outside every block)
// uncovered, so the report names that parameter and what to change.
TEST(Degradation, NoSuggestionSaysWhyAndWhatToChange) {
  auto t = dmuon::model::build_topology("moe-llm", "tiny");
  auto rule = dmuon::boundary::DedicationRule::parse("ndim=2");
  auto dedicated = dmuon::boundary::select_dedicated(t.tree, rule);
  const auto policy = dmuon::boundary::BoundaryPolicy::parse("default", true);
  const auto plan = dmuon::boundary::resolve_hook_plan(t.tree, dedicated, policy);
  const auto rep = dmuon::boundary::analyse_degradations(t.tree, plan, policy);
  ASSERT_GT(rep.warnings(), 0);
  EXPECT_TRUE(rep.suggested_boundary.empty());
  EXPECT_NE(rep.no_suggestion.find("model.embed_tokens.weight"), std::string::npos)
      << rep.no_suggestion;
  EXPECT_NE(rep.no_suggestion.find("--dedicate"), std::string::npos) << rep.no_suggestion;
  // The shipped dedication (contains:proj) leaves embeddings and head out: a suggestion.
  const auto shipped = dmuon::boundary::select_dedicated(
      t.tree, dmuon::boundary::DedicationRule::parse(t.dedicate_rule));
  const auto ok = dmuon::boundary::analyse_degradations(
      t.tree, dmuon::boundary::resolve_hook_plan(t.tree, shipped, policy), policy);
  EXPECT_FALSE(ok.suggested_boundary.empty());
  EXPECT_TRUE(ok.no_suggestion.empty());
}

}  // namespace
