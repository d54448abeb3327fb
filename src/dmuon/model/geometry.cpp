#include "dmuon/model/geometry.hpp"

#include <fmt/format.h>

#include <array>

#include "dmuon/base/error.hpp"

namespace dmuon::model {
namespace {

// Name <-> value tables of the small enums (one place each, so names and parsing agree).
template <class E, std::size_t N>
using Names = std::array<std::pair<E, const char*>, N>;

constexpr Names<NormKind, 3> kNorms{
    {{NormKind::none, "none"}, {NormKind::rms, "rms"}, {NormKind::layer, "layer"}}};
constexpr Names<AttentionKind, 3> kAttentions{
    {{AttentionKind::none, "none"}, {AttentionKind::gqa, "gqa"}, {AttentionKind::mla, "mla"}}};
constexpr Names<Activation, 3> kActivations{
    {{Activation::none, "none"}, {Activation::swiglu, "swiglu"}, {Activation::gelu, "gelu"}}};
constexpr Names<RouterScoring, 2> kScorings{
    {{RouterScoring::softmax, "softmax"}, {RouterScoring::sigmoid, "sigmoid"}}};
constexpr Names<TokenStream, 3> kStreams{{{TokenStream::text, "text"},
                                          {TokenStream::vision, "vision"},
                                          {TokenStream::action, "action"}}};

template <class E, std::size_t N>
const char* name_of(const Names<E, N>& names, E value) {
  for (const auto& [v, n] : names)
    if (v == value) return n;
  return "?";
}

template <class E, std::size_t N>
E parse_name(const Names<E, N>& names, std::string_view s, const char* what) {
  std::string valid;
  for (const auto& [v, n] : names) {
    if (s == n) return v;
    valid += (valid.empty() ? "" : ", ") + std::string(n);
  }
  throw InputError(fmt::format("unknown {} '{}' (valid: {})", what, s, valid));
}

class Checker {
 public:
  Checker(const ModuleTree& tree, std::string_view source) : tree_(tree), source_(source) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(fmt::format("{}: geometry: {}", source_, what));
  }
  void positive(std::int64_t v, const std::string& where, const char* key) const {
    if (v <= 0) fail(fmt::format("{}{} is {} (must be > 0)", where, key, v));
  }
  int module(const std::string& path, const std::string& what) const {
    const auto m = tree_.find_module(path);
    if (!m) fail(fmt::format("{} '{}' is not a module of the model", what, path));
    return *m;
  }

  void attention(const AttentionGeometry& a, const std::string& where) const {
    if (a.kind == AttentionKind::gqa) {
      positive(a.heads, where, "heads");
      positive(a.kv_heads, where, "kv_heads");
      positive(a.head_dim, where, "head_dim");
      if (a.heads % a.kv_heads != 0)
        fail(
            fmt::format("{}heads={} is not a multiple of kv_heads={}", where, a.heads, a.kv_heads));
    } else if (a.kind == AttentionKind::mla) {
      positive(a.heads, where, "heads");
      positive(a.kv_lora, where, "kv_lora");
      positive(a.qk_nope, where, "qk_nope");
      positive(a.qk_rope, where, "qk_rope");
      positive(a.v_head, where, "v_head");
      if (a.q_lora < 0) fail(fmt::format("{}q_lora is {} (must be >= 0)", where, a.q_lora));
    }
  }

  void stack(const StackGeometry& s) const {
    const std::string where = fmt::format("stack '{}': ", s.name);
    positive(s.hidden, where, "hidden");
    attention(s.attention, where);
    const auto blocks = stack_blocks(s, tree_);  // throws naming the container
    const std::string first = tree_.module(blocks.front()).path;
    for (const auto* list : {&s.attention_modules, &s.mlp_modules})
      for (const auto& prefix : *list)
        module(prefix.empty() ? first : join_path(first, prefix), where + "block module");
    if (s.attention.kind != AttentionKind::none && s.attention_modules.empty())
      fail(where + "attention needs attention_modules");
    if (s.moe) {
      positive(s.moe->top_k, where, "top_k");
      if (s.moe->router.empty() || s.moe->experts.empty())
        fail(where + "moe needs the router and experts module names");
    }
  }

 private:
  const ModuleTree& tree_;
  std::string_view source_;
};

}  // namespace

const char* norm_kind_name(NormKind k) {
  return name_of(kNorms, k);
}
NormKind parse_norm_kind(std::string_view s) {
  return parse_name(kNorms, s, "norm");
}
const char* attention_kind_name(AttentionKind k) {
  return name_of(kAttentions, k);
}
AttentionKind parse_attention_kind(std::string_view s) {
  return parse_name(kAttentions, s, "attention");
}
const char* activation_name(Activation a) {
  return name_of(kActivations, a);
}
Activation parse_activation(std::string_view s) {
  return parse_name(kActivations, s, "activation");
}
const char* router_scoring_name(RouterScoring s) {
  return name_of(kScorings, s);
}
RouterScoring parse_router_scoring(std::string_view s) {
  return parse_name(kScorings, s, "router scoring");
}
const char* token_stream_name(TokenStream s) {
  return name_of(kStreams, s);
}
TokenStream parse_token_stream(std::string_view s) {
  return parse_name(kStreams, s, "token stream");
}

bool AttentionGeometry::operator==(const AttentionGeometry& o) const {
  return kind == o.kind && heads == o.heads && kv_heads == o.kv_heads && head_dim == o.head_dim &&
         q_lora == o.q_lora && kv_lora == o.kv_lora && qk_nope == o.qk_nope &&
         qk_rope == o.qk_rope && v_head == o.v_head && causal == o.causal && rope == o.rope;
}

bool MoeGeometry::operator==(const MoeGeometry& o) const {
  return top_k == o.top_k && scoring == o.scoring && router == o.router && experts == o.experts &&
         shared == o.shared;
}

bool StackGeometry::operator==(const StackGeometry& o) const {
  return name == o.name && blocks == o.blocks && single_block == o.single_block &&
         tokens == o.tokens && hidden == o.hidden && norm == o.norm && residual == o.residual &&
         attention == o.attention && attention_modules == o.attention_modules &&
         mlp_modules == o.mlp_modules && activation == o.activation && moe == o.moe;
}

bool ModelGeometry::operator==(const ModelGeometry& o) const {
  return stacks == o.stacks && embedding == o.embedding && final_norm == o.final_norm &&
         head == o.head && final_norm_kind == o.final_norm_kind &&
         vision_tokens == o.vision_tokens && action_tokens == o.action_tokens &&
         streams == o.streams;
}

bool path_under(std::string_view path, std::string_view prefix) {
  if (prefix.empty()) return true;
  if (path.size() < prefix.size() || path.compare(0, prefix.size(), prefix) != 0) return false;
  return path.size() == prefix.size() || path[prefix.size()] == '.';
}

std::vector<int> stack_blocks(const StackGeometry& s, const ModuleTree& tree) {
  const auto container = tree.find_module(s.blocks);
  if (!container)
    throw InputError(fmt::format("geometry: stack '{}': blocks '{}' is not a module of the model",
                                 s.name, s.blocks));
  if (s.single_block) return {*container};
  const auto& children = tree.module(*container).children;
  if (children.empty())
    throw InputError(
        fmt::format("geometry: stack '{}': blocks '{}' has no children", s.name, s.blocks));
  return children;
}

const StackGeometry* ModelGeometry::stack_of(const ModuleTree& tree, std::string_view path) const {
  for (const auto& s : stacks) {
    if (!path_under(path, s.blocks)) continue;
    if (s.single_block) return &s;
    if (path.size() > s.blocks.size() && tree.find_module(s.blocks)) return &s;
  }
  return nullptr;
}

std::optional<std::int64_t> ModelGeometry::routed_top_k(const ModuleTree& tree,
                                                        std::string_view experts_path) const {
  const StackGeometry* s = stack_of(tree, experts_path);
  if (!s || !s->moe) return std::nullopt;
  const auto dot = experts_path.rfind('.');
  const auto last = dot == std::string_view::npos ? experts_path : experts_path.substr(dot + 1);
  const auto m = tree.find_module(experts_path);
  if (last != s->moe->experts || !m) return std::nullopt;
  const auto experts = static_cast<std::int64_t>(tree.module(*m).children.size());
  if (experts < 1) return std::nullopt;
  return std::min(s->moe->top_k, experts);
}

TokenStream ModelGeometry::stream_of(std::string_view path) const {
  std::size_t best = 0;
  TokenStream stream = TokenStream::text;
  for (const auto& [prefix, s] : streams)
    if (path_under(path, prefix) && prefix.size() >= best) {
      best = prefix.size();
      stream = s;
    }
  return stream;
}

void mark_routed_experts(const ModelGeometry& g, ModuleTree& tree) {
  for (std::size_t m = 0; m < tree.num_modules(); ++m) {
    const int id = static_cast<int>(m);
    if (const auto k = g.routed_top_k(tree, tree.module(id).path))
      tree.set_routed_top_k(id, static_cast<int>(*k));
  }
}

void validate_geometry(const ModelGeometry& g, const ModuleTree& tree, std::string_view source) {
  const Checker c(tree, source);
  if (g.stacks.empty()) c.fail("no stacks (a geometry needs at least one stack of blocks)");
  bool vision = false, action = false;
  for (const auto& s : g.stacks) {
    try {
      c.stack(s);
    } catch (const InputError& e) {
      const std::string what = e.what();
      // stack_blocks' own message lacks the source.
      if (what.rfind("geometry: ", 0) == 0) c.fail(what.substr(10));
      throw;
    }
    vision = vision || s.tokens == TokenStream::vision;
    action = action || s.tokens == TokenStream::action;
  }
  for (const auto& [prefix, s] : g.streams) {
    vision = vision || s == TokenStream::vision;
    action = action || s == TokenStream::action;
  }
  if (vision) c.positive(g.vision_tokens, "", "vision_tokens");
  if (action) c.positive(g.action_tokens, "", "action_tokens");
  if (!g.embedding.empty()) c.module(g.embedding, "embedding");
  if (!g.final_norm.empty()) {
    c.module(g.final_norm, "final_norm");
    if (g.final_norm_kind == NormKind::none)
      c.fail("final_norm needs final_norm_kind rms or layer");
  }
  if (!g.head.empty()) {
    const int head = c.module(g.head, "head");
    bool matrix = false;
    for (int p : tree.module(head).params) matrix = matrix || tree.parameter(p).ndim() == 2;
    if (!matrix) c.fail(fmt::format("head '{}' holds no 2-D weight", g.head));
  }
}

}  // namespace dmuon::model
