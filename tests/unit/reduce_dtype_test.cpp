// --reduce-dtype (StepSpec::reduce_dtype()): gradients travel in their own type, weights in the
// wire's. On a hand-built tree, bf16 weights with fp32 gradients, every channel's calls and bytes
// per rank are written out by hand for dmuon, fsdp-adamw, ddp-muon, ddp-dmuon and HSDP stage 2; a
// --route dtype overrides both directions (and packs apart where it differs from either); the step
// layout keeps gradient buffers in the reduce type and the schedule's gradient collectives carry
// it.

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "dmuon/engine/step/step_layout.hpp"
#include "dmuon/engine/step/step_schedule.hpp"
#include "dmuon/engine/step/step_volume.hpp"
#include "dmuon/plan/plan.hpp"
#include "dmuon/project/memory_model.hpp"
#include "two_layer_tree.hpp"

namespace {

using namespace dmuon;
using comm::CollectiveKind;
using engine::CommGroup;
using engine::Method;

// layers.0 {w [4,4], b [4]}, layers.1 {w [4,4]}; the w's dedicated (Muon), b FSDP.
using Tree = test::TwoLayerTree;

// G shard ranks × R replicas; rank 0 owns every dedicated parameter (rank0 strategy).
plan::PlanConfig config(int shard, int replicate = 1, std::vector<std::string> routes = {}) {
  plan::PlanConfig pc;
  pc.dedicate_rule = "ndim=2";
  pc.partition.shard = shard;
  pc.partition.replicate = replicate;
  pc.partition.strategy = partition::parse_strategy("rank0");
  pc.partition.pack = false;
  pc.routes = std::move(routes);
  return pc;
}

// One step with bf16 weights (2 B) and fp32 gradients (4 B) unless told otherwise.
engine::StepVolume step(const Tree& t, const plan::Plan& p, Method method, int wire = 2,
                        int reduce = 4,
                        plan::GradReduce grad_reduce = plan::GradReduce::per_param) {
  engine::VolumeOptions o;
  o.method = method;
  o.wire_bytes = wire;
  o.reduce_bytes = reduce;
  o.grad_reduce = grad_reduce;
  return engine::predict_step_volume(t.tree, p, o);
}

engine::KindExpectation at(const engine::VolumeExpectation& e, CollectiveKind k,
                           CommGroup g = CommGroup::shard) {
  return e[engine::channel_index(g, k)];
}

// G = 2, rank 1 (owns nothing), Z3. Dedicated: w0, w1 (16 elements each) at two sites, one
// pair each; b0 (4 elements, chunk 2) in the FSDP unit.
TEST(ReduceDtype, DmuonBytesByHand) {
  const Tree t;
  const auto p = plan::make_plan(t.tree, config(2));
  const auto e = step(t, p, Method::dmuon).of_rank(1);
  // Broadcasts: 2 passes × 2 pairs, 2 · (16 + 16) · 2 B = 128 B (bf16 weights).
  EXPECT_EQ(at(e, CollectiveKind::broadcast).calls, 4);
  EXPECT_EQ(at(e, CollectiveKind::broadcast).bytes, 128);
  // Reduces: one per parameter, (16 + 16) · 4 B = 128 B (fp32 gradients; all-bf16: 64).
  EXPECT_EQ(at(e, CollectiveKind::reduce).calls, 2);
  EXPECT_EQ(at(e, CollectiveKind::reduce).bytes, 128);
  // b0: all-gather 2 · (2 − 1) · 2 · 2 B = 8 B; reduce-scatter (2 − 1) · 2 · 4 B = 8 B.
  EXPECT_EQ(at(e, CollectiveKind::all_gather).bytes, 8);
  EXPECT_EQ(at(e, CollectiveKind::reduce_scatter).calls, 1);
  EXPECT_EQ(at(e, CollectiveKind::reduce_scatter).bytes, 8);
  // The owner sends and receives nothing of its own.
  const auto e0 = step(t, p, Method::dmuon).of_rank(0);
  EXPECT_EQ(at(e0, CollectiveKind::broadcast).bytes, 0);
  EXPECT_EQ(at(e0, CollectiveKind::reduce).bytes, 0);
  // The other way round (fp32 weights, bf16 gradients): 256 B broadcast, 64 B reduced.
  const auto swapped = step(t, p, Method::dmuon, 4, 2).of_rank(1);
  EXPECT_EQ(at(swapped, CollectiveKind::broadcast).bytes, 256);
  EXPECT_EQ(at(swapped, CollectiveKind::reduce).bytes, 64);
  // Packed: one reduce per pair, the same bytes.
  const auto packed = step(t, p, Method::dmuon, 2, 4, plan::GradReduce::packed).of_rank(1);
  EXPECT_EQ(at(packed, CollectiveKind::reduce).calls, 2);
  EXPECT_EQ(at(packed, CollectiveKind::reduce).bytes, 128);
}

// fsdp-adamw shards everything (chunks 8, 2, 8); ddp-muon all-reduces every gradient over
// N = 2; ddp-dmuon reduces the dedicated gradients to rank 0 and broadcasts fp32 masters back.
TEST(ReduceDtype, FsdpDdpAndDdpDmuonBytesByHand) {
  const Tree t;
  const auto p = plan::make_plan(t.tree, config(2));
  // Z3 all-gathers: 2 · 3 calls, 2 · (2 − 1) · (8 + 2 + 8) · 2 B = 72 B; reduce-scatters:
  // 3 calls, (2 − 1) · 18 · 4 B = 72 B.
  const auto f = step(t, p, Method::fsdp_adamw).of_rank(1);
  EXPECT_EQ(at(f, CollectiveKind::all_gather).calls, 6);
  EXPECT_EQ(at(f, CollectiveKind::all_gather).bytes, 72);
  EXPECT_EQ(at(f, CollectiveKind::reduce_scatter).calls, 3);
  EXPECT_EQ(at(f, CollectiveKind::reduce_scatter).bytes, 72);
  // ddp-muon: 3 all-reduces of 4 · ⌊n · (N − 1) / N⌋ = 4 · (8 + 2 + 8) = 72 B; no weights move.
  const auto d = step(t, p, Method::ddp_muon).of_rank(1);
  EXPECT_EQ(at(d, CollectiveKind::all_reduce).calls, 3);
  EXPECT_EQ(at(d, CollectiveKind::all_reduce).bytes, 72);
  EXPECT_EQ(at(d, CollectiveKind::broadcast).bytes, 0);
  EXPECT_EQ(at(d, CollectiveKind::all_gather).bytes, 0);
  // ddp-dmuon, rank 1: reduces (16 + 16) · 4 = 128 B in 2 calls; the owner's fp32 masters back,
  // 2 pairs, 4 · 32 = 128 B (masters are fp32 whatever the types); b0's all-reduce 4 · 2 = 8 B.
  const auto dd = step(t, p, Method::ddp_dmuon).of_rank(1);
  EXPECT_EQ(at(dd, CollectiveKind::reduce).calls, 2);
  EXPECT_EQ(at(dd, CollectiveKind::reduce).bytes, 128);
  EXPECT_EQ(at(dd, CollectiveKind::broadcast).calls, 2);
  EXPECT_EQ(at(dd, CollectiveKind::broadcast).bytes, 128);
  EXPECT_EQ(at(dd, CollectiveKind::all_reduce).bytes, 8);
}

// HSDP, R = 2 rows × G = 2 columns (rank = row · 2 + column); rank 0 owns w0 and w1, so column
// 0 (ranks 0, 2) roots both pairs.
TEST(ReduceDtype, HsdpStage2BytesByHand) {
  const Tree t;
  const auto p = plan::make_plan(t.tree, config(2, 2));
  const auto v = step(t, p, Method::dmuon);
  // Rank 2 (row 1, column 0): stage 1 inside its row has nothing to send (its column roots
  // everything); stage 2 sends col_0^g − own_2^g = (16 + 16) · 4 = 128 B in 2 reduces, and
  // receives the fp32 masters back, 2 broadcasts of 4 · 32 = 128 B.
  const auto r2 = v.of_rank(2);
  EXPECT_EQ(at(r2, CollectiveKind::reduce).bytes, 0);
  EXPECT_EQ(at(r2, CollectiveKind::reduce, CommGroup::replicate).calls, 2);
  EXPECT_EQ(at(r2, CollectiveKind::reduce, CommGroup::replicate).bytes, 128);
  EXPECT_EQ(at(r2, CollectiveKind::broadcast, CommGroup::replicate).bytes, 128);
  // Rank 3 (row 1, column 1): stage 1 to its row's rank 2, 128 B; no stage 2 (its column
  // owns nothing); bf16 weights 2 · 32 · 2 = 128 B in.
  const auto r3 = v.of_rank(3);
  EXPECT_EQ(at(r3, CollectiveKind::reduce).bytes, 128);
  EXPECT_EQ(at(r3, CollectiveKind::reduce, CommGroup::replicate).bytes, 0);
  EXPECT_EQ(at(r3, CollectiveKind::broadcast).bytes, 128);
  // b0 (chunk 2) all-reduces its shard across the column: 4 · ⌊2 · 1 / 2⌋ = 4 B.
  EXPECT_EQ(at(r3, CollectiveKind::all_reduce, CommGroup::replicate).bytes, 4);
  // The owner: stage 2 receives, sends nothing.
  EXPECT_EQ(at(v.of_rank(0), CollectiveKind::reduce, CommGroup::replicate).bytes, 0);
}

// A --route dtype sets both directions of its parameters. b0 routed to owner-based AdamW in
// fp32 on bf16 weights / fp32 gradients: its weights differ from the wire's, so it packs apart
// from w0 at layers.0 (3 pairs), though its gradients are of the reduce type. Rank 1, Z3:
// broadcasts 2 · 3 calls, 2 · (16 · 2 + 4 · 4 + 16 · 2) = 160 B; reduces 3 calls (per
// parameter or packed), (16 + 4 + 16) · 4 = 144 B.
TEST(ReduceDtype, RouteDtypeOverridesBothAndPacksApart) {
  const Tree t;
  const auto p = plan::make_plan(t.tree, config(2, 1, {"ndim=1=adamw:fp32"}));
  for (auto mode : {plan::GradReduce::per_param, plan::GradReduce::packed}) {
    const auto e = step(t, p, Method::dmuon, 2, 4, mode).of_rank(1);
    EXPECT_EQ(at(e, CollectiveKind::broadcast).calls, 6);
    EXPECT_EQ(at(e, CollectiveKind::broadcast).bytes, 160);
    EXPECT_EQ(at(e, CollectiveKind::reduce).calls, 3);
    EXPECT_EQ(at(e, CollectiveKind::reduce).bytes, 144);
  }
  // w1 routed to muon in bf16: its gradient travels in bf16, 16 · 4 + 16 · 2 = 96 B.
  const auto q = plan::make_plan(t.tree, config(2, 1, {"contains:layers.1=muon:bf16"}));
  const auto e = step(t, q, Method::dmuon).of_rank(1);
  EXPECT_EQ(at(e, CollectiveKind::reduce).bytes, 96);
  EXPECT_EQ(at(e, CollectiveKind::broadcast).bytes, 128);
}

engine::StepSpec spec(Method m, kernels::Dtype wire, kernels::Dtype reduce) {
  engine::StepSpec s;
  s.method = m;
  s.wire = wire;
  s.reduce = reduce;
  return s;
}

// The layout's gradient buffers take the reduce type; a --route bf16 parameter's gradient goes
// to the alt grads arena (bf16 beside fp32) while its weights stay in the bf16 weight pool.
TEST(ReduceDtype, LayoutKeepsGradientsInTheReduceType) {
  const Tree t;
  const auto p = plan::make_plan(t.tree, config(2, 1, {"contains:layers.1=muon:bf16"}));
  const auto s = spec(Method::dmuon, kernels::Dtype::bf16, kernels::Dtype::f32);
  const auto L = engine::make_layout(t.tree, p, s, 1);
  EXPECT_EQ(L.wire, kernels::Dtype::bf16);
  EXPECT_EQ(L.reduce, kernels::Dtype::f32);
  EXPECT_EQ(L.alt_reduce, kernels::Dtype::bf16);
  const auto& w0 = L.params[static_cast<std::size_t>(t.w0)];
  const auto& w1 = L.params[static_cast<std::size_t>(t.w1)];
  EXPECT_EQ(w0.grad_wire, kernels::Dtype::f32);
  EXPECT_FALSE(w0.alt_grad);
  EXPECT_EQ(w1.wire, kernels::Dtype::bf16);
  EXPECT_FALSE(w1.alt_wire);  // bf16 is the wire's
  EXPECT_EQ(w1.grad_wire, kernels::Dtype::bf16);
  EXPECT_TRUE(w1.alt_grad);
  // Rank 1 roots nothing: w0's gradient travels through the pool, w1's has its own region.
  EXPECT_EQ(L.alt_grad_elems, 16);
  EXPECT_EQ(L.alt_weight_elems, 0);
  EXPECT_GT(L.grad_pool_elems, 0);
  // Every reduce the schedule issues carries its gradient's type, every broadcast bf16.
  int reduces = 0, broadcasts = 0;
  for (const auto& op : engine::make_schedule(L, s))
    for (const auto& call : engine::collectives_of(L, op, s)) {
      if (call.kind == CollectiveKind::reduce) {
        ++reduces;
        const bool routed = call.buffer.param == t.w1;
        EXPECT_EQ(call.dtype, routed ? comm::DType::bf16 : comm::DType::f32);
      } else if (call.kind == CollectiveKind::broadcast) {
        ++broadcasts;
        EXPECT_EQ(call.dtype, comm::DType::bf16);
      } else if (call.kind == CollectiveKind::reduce_scatter) {
        EXPECT_EQ(call.dtype, comm::DType::f32);
      }
    }
  EXPECT_EQ(reduces, 2);
  EXPECT_EQ(broadcasts, 4);
}

// The memory model sizes gradient buffers by the reduce type and weights by the wire's. G = 2,
// Z3, prefetch 1: rank 0 keeps its two pairs' gradients (32 elements) and b0's shard (chunk 2):
// 4 · 34 = 136 B in fp32, 68 B in bf16; rank 1 keeps b0's shard only, 8 B. Rank 1's travelling
// gradients: groups b0 (4 padded), w0 (16), w1 (16); backward meets w1, w0, b0 with weights
// live of 2 · (16 + 16), 2 · 16 + 2 · 4, 2 · 4 B and g B per element in the ring: the joint peak
// max(64 + 16g, 40 + 32g, 8 + 36g) less the forward's 64 B of live weights: 104 B at g = 4,
// 40 B at g = 2.
TEST(ReduceDtype, MemoryModelSizesGradientsByTheReduceType) {
  const Tree t;
  const auto p = plan::make_plan(t.tree, config(2));
  const auto mixed = spec(Method::dmuon, kernels::Dtype::bf16, kernels::Dtype::f32);
  const auto bf16 = spec(Method::dmuon, kernels::Dtype::bf16, kernels::Dtype::bf16);
  EXPECT_EQ(project::memory_of(engine::make_layout(t.tree, p, mixed, 0)).gradients, 136);
  EXPECT_EQ(project::memory_of(engine::make_layout(t.tree, p, bf16, 0)).gradients, 68);
  const auto m1 = project::memory_of(engine::make_layout(t.tree, p, mixed, 1));
  const auto b1 = project::memory_of(engine::make_layout(t.tree, p, bf16, 1));
  EXPECT_EQ(m1.gradients, 8);
  EXPECT_EQ(m1.weights, 64);
  EXPECT_EQ(b1.weights, 64);
  EXPECT_EQ(m1.grad_buffers, 104);
  EXPECT_EQ(b1.grad_buffers, 40);
}

// The same wire and reduce type is the old single-type layout: no alt arena, one pair per site.
TEST(ReduceDtype, EqualTypesChangeNothing) {
  const Tree t;
  const auto p = plan::make_plan(t.tree, config(2));
  // Unset, the reduce type is the wire's (--reduce-dtype's default).
  engine::StepSpec unset;
  unset.wire = kernels::Dtype::bf16;
  EXPECT_EQ(unset.reduce_dtype(), kernels::Dtype::bf16);
  EXPECT_EQ(engine::make_layout(t.tree, p, unset, 1).reduce, kernels::Dtype::bf16);
  EXPECT_EQ(engine::volume_options(unset).reduce_bytes, 2);
  for (auto type : {kernels::Dtype::f32, kernels::Dtype::bf16}) {
    const auto L = engine::make_layout(t.tree, p, spec(Method::dmuon, type, type), 1);
    EXPECT_EQ(L.alt_grad_elems + L.alt_weight_elems, 0);
    EXPECT_EQ(L.pairs.size(), 2u);
    const int b = static_cast<int>(kernels::dtype_bytes(type));
    const auto v = step(t, p, Method::dmuon, b, b).of_rank(1);
    engine::VolumeOptions o;  // reduce_bytes left at -1: the wire's
    o.wire_bytes = b;
    const auto same = engine::predict_step_volume(t.tree, p, o).of_rank(1);
    for (std::size_t c = 0; c < engine::kChannelCount; ++c)
      EXPECT_EQ(v[c].bytes, same[c].bytes) << engine::channel_name(c);
    EXPECT_EQ(at(v, CollectiveKind::reduce).bytes, 32 * b);
  }
}

}  // namespace
