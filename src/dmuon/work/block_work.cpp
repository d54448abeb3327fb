#include "dmuon/work/block_work.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "dmuon/base/error.hpp"
#include "dmuon/work/attention_ops.hpp"
#include "dmuon/work/expert_parallel_ops.hpp"
#include "dmuon/work/memory_ops.hpp"
#include "dmuon/work/parameter_tokens.hpp"
#include "dmuon/work/unit_builder.hpp"

namespace dmuon::work::detail {
namespace {

using model::ModuleTree;
using model::path_under;

// What one block's ops depend on.
struct Context {
  const ModuleTree& tree;
  const model::StackGeometry& stack;
  int block;
  double rows;              // tokens of the micro-batch in this stack's stream on this rank
  std::int64_t batch, seq;  // sequences and tokens per sequence (the attention's, whole)
  double e;
  Fusion fusion;
  const TensorParallel& tp;
  int cp;  // context-parallel ranks: rows are 1/C of each sequence's tokens
  int ep;  // expert-parallel ranks: each runs 1/E of every MoE layer's experts
  EpDispatcher ep_dispatcher;
  ExpertRouting routing;
  double hidden() const { return static_cast<double>(stack.hidden); }
  /// Tokens of the residual stream's ops (norms, residual adds) on this rank: 1/T of `rows`
  /// under sequence parallelism.
  double stream_rows() const { return tp.sequence ? rows / tp.size : rows; }
};

// The block's modules, split by the geometry's prefixes.
struct Parts {
  std::vector<int> attention;  // linears and norms under the attention prefixes, pre-order
  std::vector<Linear> mlp;     // a dense MLP's linears
  int moe = -1;                // the MoE module, if the MLP is one
  std::vector<Linear> other;   // linears under neither prefix
};

std::string relative(const ModuleTree& tree, int block, int m) {
  const std::string& base = tree.module(block).path;
  const std::string& path = tree.module(m).path;
  if (m == block) return "";
  return base.empty() ? path : path.substr(base.size() + 1);
}

bool under_any(const std::string& rel, const std::vector<std::string>& prefixes) {
  return std::any_of(prefixes.begin(), prefixes.end(),
                     [&](const std::string& p) { return path_under(rel, p); });
}

int child_named(const ModuleTree& tree, int parent, const std::string& name) {
  for (int c : tree.module(parent).children)
    if (tree.module(c).name == name) return c;
  return -1;
}

Parts classify(const Context& c) {
  const auto& s = c.stack;
  Parts parts;
  const std::string& base = c.tree.module(c.block).path;
  for (const auto& prefix : s.mlp_modules) {
    const auto m = c.tree.find_module(prefix.empty() ? base : model::join_path(base, prefix));
    if (m && s.moe && child_named(c.tree, *m, s.moe->experts) >= 0) parts.moe = *m;
  }
  const std::string moe_path = parts.moe >= 0 ? c.tree.module(parts.moe).path : "";
  for (int m : subtree(c.tree, c.block)) {
    if (parts.moe >= 0 && path_under(c.tree.module(m).path, moe_path)) continue;
    const std::string rel = relative(c.tree, c.block, m);
    const auto linear = linear_of(c.tree, m);
    if (under_any(rel, s.attention_modules) && s.attention.kind != model::AttentionKind::none) {
      if (linear || (m != c.block && norm_of(c.tree, m))) parts.attention.push_back(m);
    } else if (linear) {
      (under_any(rel, s.mlp_modules) ? parts.mlp : parts.other).push_back(*linear);
    }
  }
  return parts;
}

// Linears of `group` that read the stack's hidden state (they share one normed input).
int consumers_of(const std::vector<Linear>& inputs, std::int64_t hidden) {
  const auto n =
      std::count_if(inputs.begin(), inputs.end(), [&](const Linear& l) { return l.in == hidden; });
  return std::max<int>(1, static_cast<int>(n));
}

void pre_norm(UnitBuilder& b, const Context& c) {
  b.add(norm_ops(c.stack.norm, c.stream_rows(), c.hidden(), c.e, c.fusion), c.block);
}

void residual(UnitBuilder& b, const Context& c) {
  if (c.stack.residual) b.add(residual_ops(c.stream_rows(), c.hidden(), c.e), c.block);
}

[[noreturn]] void bad_block(const Context& c, const std::string& what) {
  throw InputError(fmt::format("geometry: stack '{}': block '{}': {}", c.stack.name,
                               c.tree.module(c.block).path, what));
}

// Whether a region (attention, MLP) runs TP-split (RunShape::tp): its input linears
// column-parallel and its output linear row-parallel. None sharded: it runs whole on every TP
// rank (and may not under sequence parallelism, whose tokens are split); anything else is
// refused, naming the region.
bool tp_split(const Context& c, const std::vector<Linear>& inputs, const Linear& out,
              const char* region) {
  if (c.tp.size == 1) return false;
  int sharded = c.tp.dim(out.param) >= 0 ? 1 : 0;
  bool canonical = c.tp.dim(out.param) == 1;
  for (const auto& l : inputs) {
    sharded += c.tp.dim(l.param) >= 0 ? 1 : 0;
    canonical = canonical && c.tp.dim(l.param) == 0;
  }
  if (canonical) return true;
  if (sharded == 0 && !c.tp.sequence) return false;
  bad_block(c, fmt::format("--tp {}{}: its {} is not modelled split this way (valid: every input "
                           "linear column-parallel and the output linear row-parallel: "
                           "--tp-shard / --tp-row)",
                           c.tp.size, c.tp.sequence ? " --sequence-parallel" : "", region));
}

// The TP collectives entering and leaving a split region over its `rows` × hidden activations
// (work/op.hpp); its input linears are TP-sharded, so their input gradients are partial sums.
OpPair tp_enter(const Context& c) {
  return tp_region_input(c.tp.size, c.tp.sequence, c.rows * c.hidden(), c.e, true);
}

OpPair tp_leave(const Context& c) {
  return tp_region_output(c.tp.size, c.tp.sequence, c.rows * c.hidden(), c.e);
}

// Heads of one TP rank: all, or 1/T of them in a split attention (each rank whole heads).
std::int64_t local_heads(const Context& c, std::int64_t heads, bool split, const char* what) {
  if (!split) return heads;
  if (heads % c.tp.size != 0)
    bad_block(c, fmt::format("--tp {}: {} {} do not split over {} ranks (valid: a T dividing "
                             "it)",
                             c.tp.size, heads, what, c.tp.size));
  return heads / c.tp.size;
}

AttentionShape attention_shape(const Context& c, bool split) {
  const auto& a = c.stack.attention;
  return {c.batch,
          c.seq,
          local_heads(c, a.heads, split, "attention heads"),
          local_heads(c, a.k_heads(), split, "key/value heads"),
          a.qk_dim(),
          a.v_dim(),
          a.causal,
          c.cp};
}

// The attention core: fused, or under context parallelism a ring whose CP group's ranks are T
// apart (CP next to TP in torchtitan's mesh): its calls cross the domains of C·T ranks.
OpPair attention_core(const Context& c, const AttentionShape& shape) {
  return c.cp == 1 ? fused_attention_ops(shape, c.e)
                   : ring_attention_ops(shape, c.e, c.fusion, c.cp * c.tp.size);
}

// Rows per token of a norm inside the attention: 1, or for a norm one head wide in GQA (Qwen3's
// q_norm and k_norm) one per head of q, or of k when its name starts with "k".
double heads_normed(const Context& c, const AttentionShape& shape, int module, std::int64_t width) {
  const auto& a = c.stack.attention;
  if (a.kind != model::AttentionKind::gqa || width != a.head_dim) return 1.0;
  const bool k = c.tree.module(module).name.rfind('k', 0) == 0;
  return static_cast<double>(k ? shape.kv_heads : shape.heads);
}

void emit_attention(UnitBuilder& b, const Context& c, const std::vector<int>& items) {
  const auto& a = c.stack.attention;
  std::vector<Linear> linears;
  for (int m : items)
    if (auto l = linear_of(c.tree, m)) linears.push_back(*l);
  if (linears.empty()) return;
  const Linear out = linears.back();
  linears.pop_back();
  const bool mla = a.kind == model::AttentionKind::mla;
  const bool split = tp_split(c, linears, out, "attention");
  if (split && mla) bad_block(c, "--tp: a TP-split MLA attention is not modelled");
  pre_norm(b, c);
  if (split) b.add(tp_enter(c), c.block);
  b.add(fanout_ops(consumers_of(linears, c.stack.hidden), c.rows, c.hidden(), c.e), c.block);
  const AttentionShape shape = attention_shape(c, split);
  bool normed_kept = false;  // the linears reading the normed hidden state share one input
  for (int m : items) {
    if (m == out.module) continue;
    if (auto l = linear_of(c.tree, m)) {
      const bool shared = l->in == c.stack.hidden;
      b.linear(*l, c.rows, c.e, shared && normed_kept);
      normed_kept = normed_kept || shared;
    } else {
      const auto width = c.tree.parameter(c.tree.module(m).params.front()).numel();
      b.add(norm_ops(*norm_of(c.tree, m), c.rows * heads_normed(c, shape, m, width),
                     static_cast<double>(width), c.e, c.fusion),
            m);
    }
  }
  const double heads = static_cast<double>(shape.heads), seq = static_cast<double>(c.seq);
  if (a.rope) {
    const double rope = static_cast<double>(a.rope_dim());
    const double kv_heads = static_cast<double>(shape.kv_heads);  // k_heads(): not MLA here
    const double rotated =
        mla ? c.rows * heads * rope + c.rows * rope : c.rows * (heads + kv_heads) * rope;
    // The cos/sin table of this rank's positions (torchtitan shards freqs_cis under CP).
    b.add(rope_ops(rotated, seq / c.cp * rope, c.e, c.fusion), c.block);
  }
  if (mla)
    b.add(mla_assemble_ops(c.rows, heads, static_cast<double>(a.qk_nope),
                           static_cast<double>(a.qk_rope), c.e),
          c.block);
  b.add(attention_core(c, shape), c.block);
  b.linear(out, c.rows, c.e, true);  // its input is the attention's output, kept there
  if (split) b.add(tp_leave(c), c.block);
  residual(b, c);
}

void emit_activation(UnitBuilder& b, const Context& c, std::size_t inputs, double rows,
                     std::int64_t width, int module) {
  const auto act = c.stack.activation;
  if (act == model::Activation::swiglu && inputs < 2)
    bad_block(c, fmt::format("swiglu needs two input linears (gate, up) before the output "
                             "projection; found {}",
                             inputs));
  b.add(activation_ops(act, rows, static_cast<double>(width), c.e, c.fusion), module);
}

// Input linears, activation, output linear over `rows` tokens (a dense MLP, a shared expert).
// The input linears share one input, kept once (not at all when `input_kept`: an earlier op
// of the block keeps it).
void emit_mlp_linears(UnitBuilder& b, const Context& c, std::vector<Linear> linears, double rows,
                      int module, bool input_kept) {
  if (linears.empty()) return;
  const Linear out = linears.back();
  linears.pop_back();
  for (const auto& l : linears) {
    b.linear(l, rows, c.e, input_kept);
    input_kept = true;
  }
  if (!linears.empty()) emit_activation(b, c, linears.size(), rows, linears.front().out, module);
  b.linear(out, rows, c.e);
}

void emit_dense_mlp(UnitBuilder& b, const Context& c, const std::vector<Linear>& linears) {
  if (linears.empty()) return;
  const std::vector<Linear> inputs(linears.begin(), linears.end() - 1);
  const bool split = tp_split(c, inputs, linears.back(), "MLP");
  pre_norm(b, c);
  if (split) b.add(tp_enter(c), c.block);
  b.add(fanout_ops(consumers_of(inputs, c.stack.hidden), c.rows, c.hidden(), c.e), c.block);
  emit_mlp_linears(b, c, linears, c.rows, c.block, false);
  if (split) b.add(tp_leave(c), c.block);
  residual(b, c);
}

std::vector<Linear> linears_under(const ModuleTree& tree, int module) {
  std::vector<Linear> out;
  for (int m : subtree(tree, module))
    if (auto l = linear_of(tree, m)) out.push_back(*l);
  return out;
}

// Every expert's linears, checked to have expert 0's shapes (one grouped GEMM per position).
std::vector<Linear> expert_linears(const Context& c, int container) {
  const auto& experts = c.tree.module(container).children;
  const auto first = linears_under(c.tree, experts.front());
  for (int x : experts) {
    const auto l = linears_under(c.tree, x);
    bool same = l.size() == first.size();
    for (std::size_t j = 0; same && j < l.size(); ++j)
      same = l[j].in == first[j].in && l[j].out == first[j].out && l[j].bias == first[j].bias;
    if (!same || first.empty())
      bad_block(c, fmt::format("expert '{}' differs from expert '{}' (experts of one layer must "
                               "have the same linears)",
                               c.tree.module(x).path, c.tree.module(experts.front()).path));
  }
  return first;
}

struct MoeParts {
  std::vector<Linear> router, shared, other;
};

MoeParts moe_parts(const Context& c, int moe, int container) {
  const auto& m = *c.stack.moe;
  const int shared = m.shared.empty() ? -1 : child_named(c.tree, moe, m.shared);
  MoeParts p;
  for (int x : subtree(c.tree, moe)) {
    const auto l = linear_of(c.tree, x);
    if (!l || path_under(c.tree.module(x).path, c.tree.module(container).path)) continue;
    if (shared >= 0 && path_under(c.tree.module(x).path, c.tree.module(shared).path))
      p.shared.push_back(*l);
    else if (c.tree.module(x).parent == moe && c.tree.module(x).name == m.router)
      p.router.push_back(*l);
    else
      p.other.push_back(*l);
  }
  if (p.router.empty())
    bad_block(c, fmt::format("MoE module '{}' has no router linear '{}'", c.tree.module(moe).path,
                             m.router));
  return p;
}

void emit_moe(UnitBuilder& b, const Context& c, int moe) {
  const auto& m = *c.stack.moe;
  const int container = child_named(c.tree, moe, m.experts);
  const auto experts = static_cast<std::int64_t>(c.tree.module(container).children.size());
  if (experts < 1)
    bad_block(c,
              fmt::format("experts' container '{}' has no experts", c.tree.module(container).path));
  if (experts % c.ep != 0)
    bad_block(c, fmt::format("--ep {}: the {} experts of '{}' do not split over {} ranks (valid: "
                             "an EP size dividing {})",
                             c.ep, experts, c.tree.module(container).path, c.ep, experts));
  const std::int64_t k = std::min(m.top_k, experts);
  const double dk = static_cast<double>(k), routed_rows = c.rows * dk;
  // This rank's experts, and the rows they run: with balanced routing every EP rank receives
  // as many rows as it routes.
  const std::int64_t local = experts / c.ep;
  const auto expert = expert_linears(c, container);
  const MoeParts p = moe_parts(c, moe, container);
  if (c.tp.size > 1) {
    bool sharded = false;
    for (int x : subtree(c.tree, moe))
      if (const auto l = linear_of(c.tree, x)) sharded = sharded || c.tp.dim(l->param) >= 0;
    if (sharded || c.tp.sequence)
      bad_block(c, fmt::format("--tp {}{}: an MoE layer under tensor parallelism is not modelled "
                               "(its linears TP-sharded, or its tokens split by sequence "
                               "parallelism; expert parallelism: issue 41)",
                               c.tp.size, c.tp.sequence ? " --sequence-parallel" : ""));
  }
  pre_norm(b, c);
  const std::vector<Linear> shared_inputs(p.shared.begin(),
                                          p.shared.empty() ? p.shared.end() : p.shared.end() - 1);
  const int consumers = 2 + (p.shared.empty() ? 0 : consumers_of(shared_inputs, c.stack.hidden));
  b.add(fanout_ops(consumers, c.rows, c.hidden(), c.e), c.block);
  for (const auto& l : p.router) b.linear(l, c.rows, c.e);
  b.add(router_ops(m.scoring, c.rows, static_cast<double>(experts), dk, c.e), moe);
  // DeepEP takes the tokens as they are and sums the experts' rows in its combine: no local
  // gather of the routed copies before it, no weighted sum after it.
  const bool deepep = c.ep > 1 && c.ep_dispatcher == EpDispatcher::deepep;
  const double visits = deepep ? destination_ranks(experts, k, c.ep, c.routing) : 0;
  if (deepep) {
    b.add(deepep_dispatch_ops(c.ep, c.rows, visits, dk, c.hidden(), c.e,
                              static_cast<double>(experts)),
          moe);
  } else {
    b.add(dispatch_ops(c.rows, dk, c.hidden(), c.e), moe);
    if (c.ep > 1)
      b.add(ep_dispatch_ops(c.ep, routed_rows, c.hidden(), c.e, static_cast<double>(experts)), moe);
  }
  const double per_expert = routed_rows / static_cast<double>(local);
  for (std::size_t j = 0; j + 1 < expert.size(); ++j)  // the dispatched rows, kept once
    b.grouped_linear(expert[j], container, static_cast<int>(j), local, per_expert, c.e, j > 0);
  if (expert.size() > 1)
    emit_activation(b, c, expert.size() - 1, routed_rows, expert.front().out, container);
  b.grouped_linear(expert.back(), container, static_cast<int>(expert.size() - 1), local, per_expert,
                   c.e);
  if (deepep) {
    b.add(deepep_combine_ops(c.ep, c.rows, visits, dk, c.hidden(), c.e), moe);
  } else {
    if (c.ep > 1) b.add(ep_combine_ops(c.ep, routed_rows, c.hidden(), c.e), moe);
    b.add(combine_ops(c.rows, dk, c.hidden(), c.e), moe);
  }
  if (!p.shared.empty()) {
    emit_mlp_linears(b, c, p.shared, c.rows, moe, !p.router.empty());  // the router keeps it
    const double N = c.rows * c.hidden();  // shared + routed; its backward passes dy to both
    b.add({{memory_op("moe_shared_add", 2 * N * c.e, N * c.e, N, 1)}, {}}, moe);
  }
  for (const auto& l : p.other) b.linear(l, c.rows, c.e);
  residual(b, c);
}

}  // namespace

WorkUnit block_unit(const model::Topology& t, const model::StackGeometry& s, int block,
                    std::int64_t index, const RunShape& shape) {
  const auto seq = static_cast<std::int64_t>(stream_tokens_per_sample(t, block, shape.seq_len));
  const Context c{t.tree,
                  s,
                  block,
                  static_cast<double>(shape.micro_batch) * static_cast<double>(seq) /
                      static_cast<double>(shape.cp.size),
                  shape.micro_batch,
                  seq,
                  shape.element_bytes(),
                  shape.fusion,
                  shape.tp,
                  shape.cp.size,
                  shape.ep.size,
                  shape.ep.dispatcher,
                  shape.ep.routing};
  const Parts parts = classify(c);
  UnitBuilder b;
  emit_attention(b, c, parts.attention);
  if (parts.moe >= 0)
    emit_moe(b, c, parts.moe);
  else
    emit_dense_mlp(b, c, parts.mlp);
  for (const auto& l : parts.other) {
    if (c.tp.dim(l.param) >= 0 || c.tp.sequence)
      bad_block(c, fmt::format("--tp {}: linear '{}' outside the attention and MLP is not "
                               "modelled under {}",
                               c.tp.size, c.tree.module(l.module).path,
                               c.tp.sequence ? "sequence parallelism" : "tensor parallelism"));
    b.linear(l, c.rows, c.e);
  }
  WorkUnit unit;
  unit.kind = "block";
  unit.stack = s.name;
  unit.module = block;
  unit.index = index;
  b.finish(unit);
  return unit;
}

}  // namespace dmuon::work::detail
