#include "dmuon/work/step_work.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <string_view>

#include "dmuon/base/error.hpp"
#include "dmuon/work/block_work.hpp"
#include "dmuon/work/float8.hpp"
#include "dmuon/work/memory_ops.hpp"
#include "dmuon/work/parameter_tokens.hpp"
#include "dmuon/work/unit_builder.hpp"

namespace dmuon::work {
namespace {

using detail::Linear;
using detail::linear_of;
using detail::UnitBuilder;

bool is_embedding(const model::ModuleTree& tree, int m) {
  return tree.module(m).type.find("Embedding") != std::string::npos;
}

// The lookup of an Embedding module (its 2-D weight is vocab × width) over `rows` tokens.
OpPair lookup(const model::ModuleTree& tree, int m, double rows, double e) {
  const auto l = linear_of(tree, m);
  if (!l) return {};
  return embedding_ops(rows, static_cast<double>(l->in), static_cast<double>(l->out), e);
}

// The attention core's ops: the kernel, and under context parallelism its ring's all-gather and
// merge (all inside one SDPA call, which per-op SAC saves whole).
bool attention_core(const Op& op) {
  return op.kind == OpKind::attention || op.kind == OpKind::cp_collective ||
         std::string_view(op.name) == "attention.cp_merge";
}

// The embedding lookup of `text` tokens (module `m`). Whole on every TP rank: under sequence
// parallelism each rank looks up its own tokens. Vocabulary-parallel (TP-sharded along the
// vocabulary, torchtitan's RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1))):
// every rank looks up all tokens in its rows, and the partial rows leave as a TP region's
// output does (a reduce-scatter to the sequence shards under SP, else an all-reduce).
void stem_ops(detail::UnitBuilder& stem, const model::ModuleTree& tree, int m,
              const RunShape& shape, double text) {
  const auto l = linear_of(tree, m);
  const double e = shape.element_bytes();
  const auto& tp = shape.tp;
  const int dim = tp.dim(l ? l->param : -1);
  if (dim == 1)
    throw InputError(
        fmt::format("--tp {}: embedding '{}' split along its width is not modelled "
                    "(valid: vocabulary-parallel, not in --tp-row)",
                    tp.size, tree.module(m).path));
  if (dim < 0) {
    stem.add(lookup(tree, m, tp.sequence ? text / tp.size : text, e), m);
    return;
  }
  const double width = static_cast<double>(l->in);
  stem.add(vocab_parallel_embedding_ops(text, width, static_cast<double>(l->out), e), m);
  stem.add(tp_region_output(tp.size, tp.sequence, text * width, e), m);
}

// The Embedding modules' 2-D weights no GEMM of `w` multiplies (StepWork::lookup_params). A
// Linear's forward GEMM names its weight (a tied head the embedding's); grouped expert GEMMs
// (param -1) multiply experts' weights, never an Embedding's.
std::vector<int> lookup_params(const model::ModuleTree& tree, const StepWork& w) {
  std::set<int> multiplied;
  for (const auto& u : w.units)
    for (const auto& op : u.forward)
      if (op.kind == OpKind::gemm && op.param >= 0) multiplied.insert(op.param);
  std::vector<int> out;
  for (int m : tree.preorder()) {
    if (!is_embedding(tree, m)) continue;
    const auto l = linear_of(tree, m);
    if (l && !multiplied.count(l->param)) out.push_back(l->param);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// The ops checkpointing recomputes before a block's backward (run_shape.hpp).
std::vector<Op> recompute_ops(const WorkUnit& unit, AcPolicy ac) {
  std::vector<Op> out;
  int matmuls = 0;
  for (const auto& op : unit.forward) {
    bool redo = false;
    switch (ac) {
      case AcPolicy::none: break;
      case AcPolicy::full: redo = true; break;
      case AcPolicy::selective_layer: redo = (unit.index + 1) % 2 == 0; break;
      case AcPolicy::core_attn: redo = attention_core(op); break;
      case AcPolicy::selective:
        // Saved: every odd-numbered matmul, the attention core, a float8 amax (torchtitan's
        // _save_list keeps aten.abs and aten.max "for low precision training": work/float8.hpp)
        // a TP reduce-scatter's output (_c10d_functional.reduce_scatter_tensor is on it) and
        // an EP all-to-all's (all_to_all_single, likewise); all else recomputed.
        if (op.kind == OpKind::gemm) ++matmuls;
        redo = !(attention_core(op) || (op.kind == OpKind::gemm && matmuls % 2 == 1) ||
                 std::string_view(op.name) == kFloat8Amax ||
                 (op.kind == OpKind::tp_collective &&
                  op.call.kind == comm::CollectiveKind::reduce_scatter) ||
                 op.kind == OpKind::ep_collective);
        break;
    }
    if (!redo) continue;
    out.push_back(op);
    out.back().phase = Phase::recompute;
  }
  return out;
}

StepWork parameter_work(const model::Topology& t, const RunShape& shape, StepWork w) {
  const double b = static_cast<double>(shape.micro_batch), e = shape.element_bytes();
  w.note = fmt::format(
      "topology '{}' has no geometry (heads, norms, routing): the step has parameter GEMMs only "
      "(no attention, norms, activations or loss)",
      t.name);
  UnitBuilder builder;
  for (int m : t.tree.preorder()) {
    const double rows = b * module_tokens_per_sample(t, m, shape.seq_len);
    if (is_embedding(t.tree, m))
      builder.add(lookup(t.tree, m, rows, e), m);
    else if (const auto l = linear_of(t.tree, m))
      builder.linear(*l, rows, e);
  }
  WorkUnit unit;
  unit.kind = "parameters";
  builder.finish(unit);
  w.units.push_back(std::move(unit));
  return w;
}

[[noreturn]] void not_under_tp(const model::ModuleTree& tree, int m, const RunShape& shape) {
  throw InputError(fmt::format(
      "--tp {}{}: linear '{}' outside the model's blocks is not modelled {} (valid: the output "
      "head, column-parallel or whole)",
      shape.tp.size, shape.tp.sequence ? " --sequence-parallel" : "", tree.module(m).path,
      shape.tp.dim(linear_of(tree, m)->param) >= 0 ? "TP-sharded" : "on split tokens"));
}

// The TP collectives before the output head over its `n` input elements (RunShape::tp):
// a TP region's input (work/op.hpp) whose gradients are partial sums only when the head is
// column-parallel (a whole head's is whole on every rank, each keeps its shard).
OpPair head_input_collectives(const TensorParallel& tp, int dim, double n, double e) {
  if (tp.size == 1) return {};
  if (dim == 1) throw InputError("--tp: a row-parallel output head is not modelled");
  return tp_region_input(tp.size, tp.sequence, n, e, dim == 0);
}

// Linears outside every stack (an action head, the LM head), the final norm, the logits' loss.
WorkUnit head_unit(const model::Topology& t, const RunShape& shape) {
  const auto& g = *t.geometry;
  const auto& tree = t.tree;
  const double b = static_cast<double>(shape.micro_batch), e = shape.element_bytes();
  const double text = b * static_cast<double>(shape.local_seq_len());
  // Paths validated with the geometry; -1 when the model has none.
  const auto id = [&](const std::string& path) {
    return path.empty() ? -1 : tree.find_module(path).value_or(-1);
  };
  const int head = id(g.head), embedding = id(g.embedding);
  const auto& tp = shape.tp;
  UnitBuilder builder;
  for (int m : tree.preorder()) {
    if (m == head || m == embedding || is_embedding(tree, m)) continue;
    if (g.stack_of(tree, tree.module(m).path)) continue;
    if (const auto l = linear_of(tree, m)) {
      if (tp.dim(l->param) >= 0 || tp.sequence) not_under_tp(tree, m, shape);
      builder.linear(*l, b * module_tokens_per_sample(t, m, shape.local_seq_len()), e);
    }
  }
  // Sequence parallelism: the final norm on this rank's tokens, then the head's input gathered.
  const double stream = tp.sequence ? text / tp.size : text;
  if (!g.final_norm.empty()) {
    const int norm = *tree.find_module(g.final_norm);
    const auto& w = tree.parameter(tree.module(norm).params.front());
    builder.add(
        norm_ops(g.final_norm_kind, stream, static_cast<double>(w.numel()), e, shape.fusion), norm);
  }
  if (head >= 0) {
    const Linear l = *linear_of(tree, head);
    builder.add(head_input_collectives(tp, tp.dim(l.param), text * static_cast<double>(l.in), e),
                head);
    builder.linear(l, text, e);
    builder.add(cross_entropy_ops(text, static_cast<double>(l.out), e, shape.fusion), head);
    // A column-parallel head's logits are vocabulary shards: the loss reduces its row maxima,
    // exponent sums and target logits over the group (torchtitan's loss_parallel), fp32.
    if (tp.dim(l.param) == 0)
      for (int k = 0; k < 3; ++k)
        builder.add({{tp_collective_op("tp_loss_all_reduce", comm::CollectiveKind::all_reduce, text,
                                       kF32Bytes, tp.size)},
                     {}},
                    head);
  }
  WorkUnit unit;
  unit.kind = "head";
  builder.finish(unit);
  // torchtitan's filter: every Linear but the output head (work/float8.hpp).
  if (shape.float8) apply_float8(unit.forward, unit.backward, head, e, shape.tp);
  return unit;
}

}  // namespace

void check_expert_parallel(const model::Topology& t, int ep) {
  if (ep <= 1) return;
  bool moe = false;
  if (t.geometry)
    for (const auto& s : t.geometry->stacks) moe = moe || s.moe.has_value();
  if (!moe)
    throw InputError(fmt::format(
        "--ep {}: topology '{}' has no MoE layer {}(valid: --ep 1, or an MoE model such as "
        "--topology moe-llm)",
        ep, t.name, t.geometry ? "" : "whose routing the step work knows "));
}

namespace {

std::vector<std::string> not_modelled(const model::ModelGeometry& g, const ExpertParallel& e) {
  const int ep = e.size;
  std::vector<std::string> out{
      "dropout, data loading and the optimizer's elementwise work (priced elsewhere)"};
  bool moe = false, vision = false, mla = false;
  for (const auto& s : g.stacks) {
    moe = moe || s.moe.has_value();
    vision = vision || s.tokens == model::TokenStream::vision;
    mla = mla || s.attention.kind == model::AttentionKind::mla;
  }
  if (moe && ep == 1)
    out.emplace_back(
        "expert parallelism: every rank runs all experts of its layers on its own tokens (no "
        "all-to-all dispatch or combine between ranks)");
  if (moe && ep > 1 && e.dispatcher == EpDispatcher::all_to_all)
    out.emplace_back(
        "the host's wait for the dispatch's row counts (torchtitan reads the all-to-all's "
        "split sizes on the CPU) and the dispatch's overlap with the shared expert");
  if (moe && ep > 1 && e.dispatcher == EpDispatcher::deepep)
    out.emplace_back(
        "DeepEP's kernels beyond their bytes (costed as an all-to-all of the rows over the "
        "same links; the SMs they hold), the host's wait for the received counts "
        "(fused_a2a.py: the CPU waits for the GPU's signal), the routing weights' multiply "
        "inside the experts' activation");
  if (moe) {
    out.emplace_back("expert load imbalance: every expert gets tokens x k / E (balanced routing)");
    out.emplace_back(
        "auxiliary load-balancing losses, group-limited routing and multi-token "
        "prediction heads");
  }
  if (mla) out.emplace_back("FlashAttention's padding of MLA's v heads to the q/k head width");
  if (vision)
    out.emplace_back(
        "the vision tokens' merge into the text sequence (the text stream keeps "
        "--seq-len tokens)");
  return out;
}

}  // namespace

void check_context_parallel(const model::Topology& t, int cp) {
  if (cp <= 1) return;
  if (!t.geometry)
    throw InputError(
        fmt::format("--cp {} needs a model with a geometry (topology '{}' has none: "
                    "no attention to split; valid: a model with a geometry, or --cp 1)",
                    cp, t.name));
  const auto& g = *t.geometry;
  for (const auto& s : g.stacks) {
    if (s.tokens != model::TokenStream::text)
      throw InputError(
          fmt::format("--cp {}: stack '{}' runs on {} tokens; context parallelism is "
                      "modelled for text stacks only (valid: a model whose stacks are all text, or "
                      "--cp 1)",
                      cp, s.name, model::token_stream_name(s.tokens)));
    if (s.attention.kind != model::AttentionKind::none && !s.attention.causal)
      throw InputError(
          fmt::format("--cp {}: stack '{}' has bidirectional attention; context "
                      "parallelism's load balance needs a causal mask (valid: causal attention, "
                      "or --cp 1)",
                      cp, s.name));
  }
}

OpTotals StepWork::totals(Phase phase) const {
  OpTotals t;
  for (const auto& u : units)
    t.add(phase == Phase::forward ? u.forward
                                  : (phase == Phase::backward ? u.backward : u.recompute));
  return t;
}

StepWork build_step_work(const model::Topology& t, const RunShape& shape) {
  validate_run_shape(shape);
  StepWork w;
  w.shape = shape;
  w.text_tokens =
      static_cast<double>(shape.micro_batch) * static_cast<double>(shape.local_seq_len());
  if (!t.geometry && shape.float8)
    throw InputError(fmt::format(
        "--compute-dtype fp8 needs a model with a geometry (topology '{}' has none: which of its "
        "linears torchtitan would run in float8 is unknown)",
        t.name));
  check_context_parallel(t, shape.cp.size);
  check_expert_parallel(t, shape.ep.size);
  if (!t.geometry) return parameter_work(t, shape, std::move(w));
  const auto& g = *t.geometry;
  w.has_geometry = true;
  if (!g.embedding.empty()) {
    UnitBuilder stem;
    const int m = *t.tree.find_module(g.embedding);
    stem_ops(stem, t.tree, m, shape, w.text_tokens);
    WorkUnit unit;
    unit.kind = "stem";
    stem.finish(unit);
    w.units.push_back(std::move(unit));
  }
  for (const auto& s : g.stacks) {
    const auto blocks = model::stack_blocks(s, t.tree);
    for (std::size_t k = 0; k < blocks.size(); ++k) {
      WorkUnit unit = detail::block_unit(t, s, blocks[k], static_cast<std::int64_t>(k), shape);
      if (shape.float8)
        apply_float8(unit.forward, unit.backward, -1, shape.element_bytes(), shape.tp);
      unit.recompute = recompute_ops(unit, shape.ac);
      w.units.push_back(std::move(unit));
    }
  }
  w.units.push_back(head_unit(t, shape));
  w.not_modelled = not_modelled(g, shape.ep);
  w.lookup_params = lookup_params(t.tree, w);
  return w;
}

std::vector<int> gemm_params(const model::ModuleTree& tree, const Op& op) {
  if (op.kind != OpKind::gemm) return {};
  if (op.member < 0) return {op.param};
  std::vector<int> out;
  for (int expert : tree.module(op.module).children) {
    int position = 0;
    for (int m : detail::subtree(tree, expert)) {
      const auto l = linear_of(tree, m);
      if (!l) continue;
      if (position++ == op.member) out.push_back(l->param);
    }
  }
  return out;
}

}  // namespace dmuon::work
