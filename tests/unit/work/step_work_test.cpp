// The step's work from the presets: FLOP conventions against the published figures
// (PUBLIC-THROUGHPUT.md §0), the op list against the conventions (two independent sums),
// activation checkpointing, routing, and models without a geometry.

#include <gtest/gtest.h>

#include <algorithm>

#include "dmuon/base/error.hpp"
#include "dmuon/model/topology.hpp"
#include "dmuon/model/topology_file.hpp"
#include "dmuon/work/flop_convention.hpp"
#include "dmuon/work/step_work.hpp"
#include "dmuon/work/throughput.hpp"

namespace {

using namespace dmuon;
using namespace dmuon::work;
using model::build_topology;

RunShape shape(std::int64_t seq, AcPolicy ac = AcPolicy::none, std::int64_t batch = 1) {
  RunShape s;
  s.seq_len = seq;
  s.micro_batch = batch;
  s.ac = ac;
  return s;
}

double gflop(const model::Topology& t, std::int64_t seq, FlopConvention c) {
  return model_flops_per_token(t, seq).of(c) / 1e9;
}

TEST(FlopConventions, Llama3_8bAt8192MatchesThePublishedFigures) {
  const auto t = build_topology("llm", "llama3-8b");
  EXPECT_NEAR(gflop(t, 8192, FlopConvention::six_n), 48.2, 0.05);
  EXPECT_NEAR(gflop(t, 8192, FlopConvention::six_n_attn), 57.9, 0.05);
  EXPECT_NEAR(gflop(t, 8192, FlopConvention::megatron), 57.9, 0.05);
  EXPECT_NEAR(gflop(t, 8192, FlopConvention::megatron_causal), 51.5, 0.05);
  // torchtitan's convention exactly: 6·(N − embedding) + 12·L·h·s, N = 8,030,261,248.
  const double N = 8030261248.0, emb = 128256.0 * 4096;
  EXPECT_DOUBLE_EQ(model_flops_per_token(t, 8192).six_n_attn,
                   6 * (N - emb) + 12.0 * 32 * 4096 * 8192);
}

TEST(FlopConventions, Llama3_70bAt8192) {
  const auto t = build_topology("llm", "llama3-70b");
  EXPECT_NEAR(gflop(t, 8192, FlopConvention::megatron), 481.4, 0.05);
  EXPECT_NEAR(gflop(t, 8192, FlopConvention::megatron_causal), 449.2, 0.05);
  EXPECT_NEAR(gflop(t, 8192, FlopConvention::six_n_attn), 481.4, 0.05);
  EXPECT_EQ(t.tree.total_numel(), 70553706496);  // the model card's 70.6B
}

TEST(FlopConventions, ActiveParametersOfTheMoePresets) {
  // DeepSeek-V3 routes 8 of 256 plus 1 shared expert: 37B activated per token (its report);
  // Mixtral 2 of 8: 12.9B active (Mistral's release). 6n / 6 is the active parameter count.
  const auto ds = model_flops_per_token(build_topology("moe-llm", "deepseek-v3"), 4096);
  EXPECT_GT(ds.params_all, 37.0e9);
  EXPECT_LT(ds.params_all, 38.0e9);
  const auto mx = model_flops_per_token(build_topology("moe-llm", "mixtral-8x7b"), 4096);
  EXPECT_GT(mx.params_all, 12.8e9);
  EXPECT_LT(mx.params_all, 13.0e9);
  // Qwen3-30B-A3B, "3.3B activated" (its model card), summed by hand per layer: q, o 2048 x 4096,
  // k, v 2048 x 512, 8 experts of 3 x 2048 x 768, the router 2048 x 128, two norms of 2048 and
  // q_norm, k_norm of 128; 48 layers; the embedding and the untied head, 151936 x 2048 each, and
  // the final norm (N_all: every parameter a token touches).
  const auto qw = model_flops_per_token(build_topology("moe-llm", "qwen3-30b-a3b"), 4096);
  const double layer = 2 * 2048.0 * 4096 + 2 * 2048.0 * 512 + 8 * 3 * 2048.0 * 768 + 2048.0 * 128 +
                       2 * 2048 + 2 * 128;
  EXPECT_DOUBLE_EQ(qw.params_all, 48 * layer + 2 * 2048.0 * 151936 + 2048);
  EXPECT_NEAR(qw.params_all, 3.3e9, 0.06e9);
}

TEST(FlopConventions, NamesAndErrors) {
  for (auto c : {FlopConvention::six_n, FlopConvention::six_n_attn, FlopConvention::megatron,
                 FlopConvention::megatron_causal})
    EXPECT_EQ(parse_flop_convention(flop_convention_name(c)), c);
  EXPECT_THROW(parse_flop_convention("6N"), InputError);
  EXPECT_THROW(model_flops_per_token(build_topology("llm"), 0), InputError);
}

// Sum of one phase's matmul FLOPs per text token.
double flops_per_token(const StepWork& w, Phase p) {
  return w.totals(p).flops / w.text_tokens;
}

TEST(StepWork, MatmulFlopsEqualTheCausalConvention) {
  // Two independent sums: the op list (per op, forward + backward) and the closed form.
  const std::vector<std::tuple<std::string, std::string, std::int64_t>> models = {
      {"llm", "llama3-8b", 8192},
      {"llm", "qwen2.5-1.5b", 4096},
      {"moe-llm", "mixtral-8x7b", 4096},
      {"moe-llm", "deepseek-v3", 4096},
      {"nested", "paper", 1024},
      {"vla", "tiny", 64},
      {"moe", "tiny", 32},
      {"sequential", "tiny", 16}};
  for (const auto& [name, preset, seq] : models) {
    const auto t = build_topology(name, preset);
    const auto w = build_step_work(t, shape(seq, AcPolicy::none, 2));
    ASSERT_TRUE(w.has_geometry) << name;
    const double ops = flops_per_token(w, Phase::forward) + flops_per_token(w, Phase::backward);
    const double closed = model_flops_per_token(t, seq).megatron_causal;
    EXPECT_NEAR(ops / closed, 1.0, 1e-12) << name << "/" << preset;
    EXPECT_DOUBLE_EQ(flops_per_token(w, Phase::backward), 2 * flops_per_token(w, Phase::forward))
        << name;
  }
}

// An input embedding is a lookup (the stem's ops), not a Linear: the engine must not run a
// synthetic GEMM for it (engine::StepSpec::compute_of). A head tied to it multiplies the same
// table, so a tied model has nothing looked up only.
TEST(StepWork, AnUntiedEmbeddingIsLookedUpNotMultiplied) {
  const auto t = build_topology("llm", "llama3-8b");
  const auto w = build_step_work(t, shape(64, AcPolicy::none, 1));
  const int embed = *t.tree.find_parameter("model.embed_tokens.weight");
  EXPECT_EQ(w.lookup_params, std::vector<int>{embed});
  for (const auto& u : w.units)
    for (const auto& op : u.forward) EXPECT_NE(op.param, embed) << op.name;
  EXPECT_EQ(std::string(w.units.front().forward.front().name), "embedding");
  const auto tied = build_topology("llm", "qwen2.5-1.5b");  // tie_embeddings 1
  EXPECT_TRUE(build_step_work(tied, shape(64, AcPolicy::none, 1)).lookup_params.empty());
}

TEST(StepWork, FullCheckpointingAddsExactlyOneForward) {
  const auto t = build_topology("llm", "llama3-8b");
  const auto none = build_step_work(t, shape(2048));
  const auto full = build_step_work(t, shape(2048, AcPolicy::full));
  EXPECT_EQ(none.totals(Phase::recompute).ops, 0);
  OpTotals blocks;
  for (const auto& u : full.units) {
    if (u.kind != "block") {
      EXPECT_TRUE(u.recompute.empty()) << u.kind;  // embedding, head: not checkpointed
      continue;
    }
    ASSERT_EQ(u.recompute.size(), u.forward.size());
    for (std::size_t k = 0; k < u.forward.size(); ++k) {
      EXPECT_STREQ(u.recompute[k].name, u.forward[k].name);
      EXPECT_EQ(u.recompute[k].phase, Phase::recompute);
      EXPECT_DOUBLE_EQ(u.recompute[k].bytes(), u.forward[k].bytes());
    }
    blocks.add(u.forward);
  }
  EXPECT_DOUBLE_EQ(full.totals(Phase::recompute).flops, blocks.flops);
  EXPECT_DOUBLE_EQ(full.totals(Phase::recompute).bytes, blocks.bytes);
  // HFU counts it: hardware FLOPs = model FLOPs (causal) + the blocks' forward again.
  EXPECT_NEAR(hardware_flops_per_token(full) / (model_flops_per_token(t, 2048).megatron_causal +
                                                blocks.flops / full.text_tokens),
              1.0, 1e-12);
}

TEST(StepWork, SelectiveRecomputesEveryOtherMatmulAndNotTheAttention) {
  const auto t = build_topology("llm", "llama3-8b");
  const auto w = build_step_work(t, shape(1024, AcPolicy::selective));
  const auto& block = w.units[1];
  ASSERT_EQ(block.kind, "block");
  // Forward matmuls q, k, v, o, gate, up, down: the 2nd, 4th and 6th (k, o, up) recomputed.
  const double T = 1024, h = 4096;
  double gemm = 0;
  for (const auto& op : block.recompute) {
    EXPECT_NE(op.kind, OpKind::attention);
    if (op.kind == OpKind::gemm) gemm += op.flops;
  }
  EXPECT_DOUBLE_EQ(gemm, 2 * T * (h * 1024 + h * h + h * 14336));
  const auto names = [&] {
    std::vector<std::string> v;
    for (const auto& op : block.recompute) v.emplace_back(op.name);
    return v;
  }();
  EXPECT_EQ(std::count(names.begin(), names.end(), "rms_norm"), 2);
  EXPECT_EQ(std::count(names.begin(), names.end(), "swiglu"), 1);
  EXPECT_EQ(std::count(names.begin(), names.end(), "residual_add"), 2);
  // The GQA copy of K and V (32 heads over 8) is not a matmul: recomputed, 2 x T x 32 x 128 x 2
  // bytes written.
  const auto expand = std::find(names.begin(), names.end(), "attention.gqa_expand");
  ASSERT_NE(expand, names.end());
  EXPECT_DOUBLE_EQ(block.recompute[static_cast<std::size_t>(expand - names.begin())].bytes_written,
                   2 * T * 32 * 128 * 2);
}

// --compute-dtype fp8 (work/float8.hpp): torchtitan's filter converts the block's seven Linears
// but not the output head; --ac selective recomputes the casts, never an amax (saved by
// torchtitan's _save_list), --ac full both.
TEST(StepWork, Float8LinearsAndTheirScalingOps) {
  const auto t = build_topology("llm", "llama3-8b");
  auto s = shape(1024, AcPolicy::selective);
  s.float8 = true;
  const auto w = build_step_work(t, s);
  const auto count = [](const std::vector<Op>& ops, const char* name, bool fp8_gemm = false) {
    return std::count_if(ops.begin(), ops.end(), [&](const Op& op) {
      return fp8_gemm ? op.kind == OpKind::gemm && op.float8 : std::string(op.name) == name;
    });
  };
  const auto& block = w.units[1];
  ASSERT_EQ(block.kind, "block");
  EXPECT_EQ(count(block.forward, "", true), 7);
  EXPECT_EQ(count(block.forward, "float8.amax"), 14);  // input and weight of each
  EXPECT_EQ(count(block.forward, "float8.cast"), 14);
  EXPECT_EQ(count(block.backward, "", true), 14);  // dgrad and wgrad
  EXPECT_EQ(count(block.backward, "float8.transpose"), 21);
  // Forward scaling bytes per Linear (K in, N out, bf16 e = 2): amax and cast of the input
  // (T·K·2 + T·K·2 + T·K) and of the weight (N·K likewise) = 5·K·(T + N). T = 1024, h 4096,
  // kv 1024, ffn 14336: q and o 4096·5120, k and v 4096·2048, gate and up 4096·15360, down
  // 14336·5120; Σ K·(T + N) = 257,949,696, so 1,289,748,480 bytes.
  double scaling = 0;
  for (const auto& op : block.forward)
    if (std::string(op.name).rfind("float8.", 0) == 0) scaling += op.bytes();
  EXPECT_DOUBLE_EQ(scaling, 1289748480.0);
  // Selective: the 2nd, 4th and 6th GEMMs again (in fp8), the 14 casts, no amax.
  EXPECT_EQ(count(block.recompute, "", true), 3);
  EXPECT_EQ(count(block.recompute, "float8.cast"), 14);
  EXPECT_EQ(count(block.recompute, "float8.amax"), 0);
  s.ac = AcPolicy::full;
  const auto full = build_step_work(t, s);
  EXPECT_EQ(count(full.units[1].recompute, "float8.amax"), 14);
  EXPECT_EQ(count(full.units[1].recompute, "", true), 7);
  // The head: its Linear (the output projection) stays bf16, with no scaling op.
  const auto& head = w.units.back();
  ASSERT_EQ(head.kind, "head");
  EXPECT_EQ(count(head.forward, "", true), 0);
  EXPECT_EQ(count(head.forward, "float8.amax"), 0);
  EXPECT_EQ(count(head.backward, "float8.transpose"), 0);
}

TEST(StepWork, OtherPolicies) {
  const auto t = build_topology("llm", "tiny");  // 4 layers
  const auto layer = build_step_work(t, shape(64, AcPolicy::selective_layer));
  const auto attn = build_step_work(t, shape(64, AcPolicy::core_attn));
  int recomputed = 0;
  for (std::size_t k = 0; k < layer.units.size(); ++k) {
    const auto& u = layer.units[k];
    if (u.kind != "block") continue;
    EXPECT_EQ(u.recompute.size(), u.index % 2 == 1 ? u.forward.size() : 0u) << u.index;
    recomputed += !u.recompute.empty();
    ASSERT_EQ(attn.units[k].recompute.size(), 1u);
    EXPECT_EQ(attn.units[k].recompute[0].kind, OpKind::attention);
  }
  EXPECT_EQ(recomputed, 2);
  EXPECT_EQ(parse_ac_policy("selective-layer"), AcPolicy::selective_layer);
  EXPECT_THROW(parse_ac_policy("op"), InputError);
}

TEST(StepWork, CausalAttentionCostsHalf) {
  auto t = build_topology("llm", "tiny");
  const auto causal = build_step_work(t, shape(128));
  t.geometry->stacks[0].attention.causal = false;
  const auto full = build_step_work(t, shape(128));
  double a = 0, b = 0;
  for (const auto& u : causal.units)
    for (const auto& op : u.forward)
      if (op.kind == OpKind::attention) a += op.flops;
  for (const auto& u : full.units)
    for (const auto& op : u.forward)
      if (op.kind == OpKind::attention) b += op.flops;
  EXPECT_GT(a, 0);
  EXPECT_DOUBLE_EQ(b, 2 * a);
  // Both conventions see it: megatron - megatron-causal = half the attention term.
  const auto f = model_flops_per_token(t, 128);
  EXPECT_DOUBLE_EQ(f.megatron, f.megatron_causal);  // no causal layer left
}

TEST(StepWork, BlockOpsOfALlamaLayer) {
  const auto w = build_step_work(build_topology("llm", "tiny"), shape(16));
  ASSERT_EQ(w.units.front().kind, "stem");
  ASSERT_EQ(w.units.back().kind, "head");
  std::vector<std::string> fwd;
  for (const auto& op : w.units[1].forward) fwd.emplace_back(op.name);
  EXPECT_EQ(fwd, (std::vector<std::string>{"rms_norm", "linear", "linear", "linear", "rope",
                                           "attention.gqa_expand", "attention", "linear",
                                           "residual_add", "rms_norm", "linear", "linear", "swiglu",
                                           "linear", "residual_add"}));
  // tiny: h 128, 4 heads of 32 over 1 kv head; RoPE on q (4 heads) and k (1) of 16 tokens.
  const auto& rope = w.units[1].forward[4];
  EXPECT_DOUBLE_EQ(rope.vector_flops, 3 * 16 * 5 * 32);
  const auto& attention = w.units[1].forward[6];
  EXPECT_EQ(attention.attention.heads, 4);
  EXPECT_EQ(attention.attention.kv_heads, 1);
  EXPECT_EQ(attention.attention.qk_dim, 32);
  // Backward: reverse order; q, k, v share the normed input: two gradient accumulations.
  std::vector<std::string> bwd;
  for (const auto& op : w.units[1].backward) bwd.emplace_back(op.name);
  EXPECT_EQ(bwd.front(), "residual_add.bwd");
  EXPECT_EQ(std::count(bwd.begin(), bwd.end(), "grad_accumulate"), 3);  // 2 attn + 1 mlp
  EXPECT_EQ(bwd.back(), "rms_norm.bwd");
  std::vector<std::string> head;
  for (const auto& op : w.units.back().forward) head.emplace_back(op.name);
  EXPECT_EQ(head, (std::vector<std::string>{"rms_norm", "linear", "cross_entropy"}));
}

TEST(StepWork, Qwen3QkNormsEveryHeadAndAWiderQuery) {
  // tiny-qk-norm: h 128, q 256 = 8 heads of 32, kv 32 = 1 kv head; per-head RMSNorm of q and k.
  const auto w = build_step_work(build_topology("moe-llm", "tiny-qk-norm"), shape(16));
  const auto& fwd = w.units[1].forward;
  std::vector<const Op*> norms;
  for (const auto& op : fwd)
    if (std::string(op.name) == "rms_norm") norms.push_back(&op);
  ASSERT_EQ(norms.size(), 4u);  // input, q_norm, k_norm, post-attention
  // Fused RMSNorm: 4 N + 3 R vector FLOPs over R rows of W = N / R elements.
  const auto flops = [](double rows, double width) { return 4 * rows * width + 3 * rows; };
  EXPECT_DOUBLE_EQ(norms[0]->vector_flops, flops(16, 128));
  EXPECT_DOUBLE_EQ(norms[1]->vector_flops, flops(16 * 8, 32));  // q: 8 heads per token
  EXPECT_DOUBLE_EQ(norms[2]->vector_flops, flops(16 * 1, 32));  // k: 1 kv head per token
  EXPECT_DOUBLE_EQ(norms[3]->vector_flops, flops(16, 128));
  const auto attention = std::find_if(fwd.begin(), fwd.end(),
                                      [](const Op& op) { return op.kind == OpKind::attention; });
  EXPECT_EQ(attention->attention.heads, 8);
  EXPECT_EQ(attention->attention.kv_heads, 1);
  // q_proj 128 -> 256 and o_proj 256 -> 128: 2 * 16 * 128 * 256 FLOPs each.
  std::vector<double> gemm;
  for (const auto& op : fwd)
    if (std::string(op.name) == "linear") gemm.push_back(op.flops);
  ASSERT_GE(gemm.size(), 4u);
  EXPECT_DOUBLE_EQ(gemm[0], 2.0 * 16 * 128 * 256);
  EXPECT_DOUBLE_EQ(gemm[3], 2.0 * 16 * 256 * 128);
}

TEST(StepWork, DeepSeekV3RoutesEightOf256PlusShared) {
  const auto t = build_topology("moe-llm", "deepseek-v3");
  const auto w = build_step_work(t, shape(4096));
  // Layers 0-2 dense, 3.. MoE: grouped expert GEMMs of 4096·8/256 = 128 tokens per expert.
  const auto& moe = w.units[1 + 3];
  std::vector<std::string> names;
  double expert_flops = 0;
  for (const auto& op : moe.forward) {
    names.emplace_back(op.name);
    if (op.member >= 0) {
      EXPECT_EQ(op.gemm.batch, 256);
      EXPECT_DOUBLE_EQ(op.gemm.m, 128);
      expert_flops += op.flops;
      EXPECT_EQ(gemm_params(t.tree, op).size(), 256u);
    }
  }
  EXPECT_DOUBLE_EQ(expert_flops, 2.0 * 4096 * 8 * 3 * 7168 * 2048);
  for (const char* n : {"router_scores", "router_topk", "moe_dispatch", "moe_combine",
                        "moe_shared_add", "mla_assemble", "attention"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  // MLA attention: 128 heads, q/k 192 wide, v 128.
  const auto attention = std::find_if(moe.forward.begin(), moe.forward.end(),
                                      [](const Op& op) { return op.kind == OpKind::attention; });
  EXPECT_EQ(attention->attention.qk_dim, 192);
  EXPECT_EQ(attention->attention.v_dim, 128);
  EXPECT_EQ(attention->attention.kv_heads, 128);
  const auto text = [&](const std::string& needle) {
    for (const auto& n : w.not_modelled)
      if (n.find(needle) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(text("expert parallelism"));
  EXPECT_FALSE(build_step_work(build_topology("llm", "tiny"), shape(8)).not_modelled.empty());
}

TEST(Routing, PresetTopKIsExposed) {
  const auto k = [](const model::Topology& t, const std::string& experts) {
    return t.geometry->routed_top_k(t.tree, experts);
  };
  EXPECT_EQ(k(build_topology("moe-llm", "deepseek-v3"), "model.layers.3.mlp.experts"), 8);
  EXPECT_EQ(k(build_topology("moe-llm", "mixtral-8x7b"), "model.layers.0.mlp.experts"), 2);
  EXPECT_EQ(k(build_topology("moe", "tiny"), "layers.0.experts"), 2);
  EXPECT_EQ(k(build_topology("moe-llm", "tiny", {{"top_k", "3"}}), "model.layers.1.mlp.experts"),
            3);
  EXPECT_EQ(k(build_topology("moe-llm", "tiny", {{"E", "1"}}), "model.layers.1.mlp.experts"), 1);
  EXPECT_FALSE(k(build_topology("moe-llm", "deepseek-v3"), "model.layers.0.mlp").has_value());
}

TEST(StepWork, WithoutGeometryParameterWorkOnly) {
  auto t = build_topology("moe", "tiny");
  t.geometry.reset();
  const auto w = build_step_work(t, shape(32));
  EXPECT_FALSE(w.has_geometry);
  EXPECT_NE(w.note.find("no geometry"), std::string::npos);
  ASSERT_EQ(w.units.size(), 1u);
  for (const auto& op : w.units[0].forward) EXPECT_EQ(op.kind, OpKind::gemm);
  // The engine's routing: top-2 of 8 experts: each expert's 2 GEMMs on 32·2/8 = 8 tokens.
  const double d = 128, ff = 256, E = 8, L = 4;
  const double per_layer = 2 * 32 * d * E + 2 * 8 * E * (2 * d * ff) + 2 * 32 * d * d;
  EXPECT_DOUBLE_EQ(w.totals(Phase::forward).flops, L * per_layer);
  const auto f = model_flops_per_token(t, 32);
  EXPECT_GT(f.of(FlopConvention::six_n), 0);
  try {
    (void)f.of(FlopConvention::six_n_attn);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no geometry"), std::string::npos) << e.what();
  }
}

TEST(StepWork, TopologyFileWithoutGeometryHasNone) {
  auto t = build_topology("llm", "tiny");
  t.geometry.reset();
  const auto back = model::parse_topology_json(model::write_topology_json(t), "mem");
  EXPECT_FALSE(back.geometry.has_value());
  EXPECT_FALSE(build_step_work(back, shape(8)).has_geometry);
  // --compute-dtype fp8 needs the geometry (which Linear is the output head): refused, one line.
  auto fp8 = shape(8);
  fp8.float8 = true;
  try {
    (void)build_step_work(back, fp8);
    FAIL() << "fp8 without a geometry: expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--compute-dtype fp8 needs a model with a geometry"),
              std::string::npos)
        << e.what();
  }
}

TEST(StepWork, BadRunShape) {
  const auto t = build_topology("llm", "tiny");
  EXPECT_THROW(build_step_work(t, shape(0)), InputError);
  EXPECT_THROW(build_step_work(t, shape(8, AcPolicy::none, 0)), InputError);
}

TEST(StepWork, VisionTowerIsBidirectionalOverItsTokens) {
  const auto t = build_topology("nested", "paper");
  const auto w = build_step_work(t, shape(512));
  bool vision = false, action = false;
  for (const auto& u : w.units)
    for (const auto& op : u.forward) {
      if (op.kind != OpKind::attention) continue;
      if (u.stack == "vision") {
        vision = true;
        EXPECT_FALSE(op.attention.causal);
        EXPECT_EQ(op.attention.seq, 256);
        EXPECT_EQ(op.attention.heads, 16);
        EXPECT_EQ(op.attention.qk_dim, 80);
      } else if (u.stack == "action") {
        action = true;
        EXPECT_FALSE(op.attention.causal);
        EXPECT_EQ(op.attention.seq, 50);
      } else {
        EXPECT_TRUE(op.attention.causal);
        EXPECT_EQ(op.attention.seq, 512);
      }
    }
  EXPECT_TRUE(vision);
  EXPECT_TRUE(action);
}

}  // namespace
