#pragma once
// The geometry of a model: what its module tree does not say but its activation work needs —
// attention heads and head widths (GQA, MLA), causal or bidirectional, the norm and activation
// kinds, MoE routing (top-k, router scoring, shared experts), and which token stream (text,
// vision, action) each stack of blocks runs on. Built-in presets carry it (topology.hpp);
// topology files may (the optional "geometry" object, docs/STEP-WORK.md); a model without
// it runs parameter work only.
//
// A stack is a sequence of blocks (the children of `blocks`, or `blocks` itself when
// single_block). Inside a block, the linears under `attention_modules` form the attention (the
// last one is the output projection, after the attention core), the linears under
// `mlp_modules` form the MLP (the last one is the output projection, after the activation) or,
// when that module holds a child named MoeGeometry::experts, the MoE layer. Prefixes are
// block-relative dotted paths; "" is the whole block.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dmuon/model/module_tree.hpp"

namespace dmuon::model {

enum class NormKind { none, rms, layer };
enum class AttentionKind { none, gqa, mla };
enum class Activation { none, swiglu, gelu };
enum class RouterScoring { softmax, sigmoid };
enum class TokenStream { text, vision, action };

/// "none" | "rms" | "layer", and back (InputError naming the valid names).
const char* norm_kind_name(NormKind k);
NormKind parse_norm_kind(std::string_view s);
/// "none" | "gqa" | "mla".
const char* attention_kind_name(AttentionKind k);
AttentionKind parse_attention_kind(std::string_view s);
/// "none" | "swiglu" | "gelu".
const char* activation_name(Activation a);
Activation parse_activation(std::string_view s);
/// "softmax" | "sigmoid".
const char* router_scoring_name(RouterScoring s);
RouterScoring parse_router_scoring(std::string_view s);
/// "text" | "vision" | "action".
const char* token_stream_name(TokenStream s);
TokenStream parse_token_stream(std::string_view s);

struct AttentionGeometry {
  AttentionKind kind = AttentionKind::none;
  /// Query heads (GQA and MLA); GQA's k/v heads (== heads for MHA, 1 for MQA) and head width.
  std::int64_t heads = 0, kv_heads = 0, head_dim = 0;
  /// MLA (DeepSeek-V2/V3): q and kv low ranks, per-head q/k widths without and with RoPE, v width.
  std::int64_t q_lora = 0, kv_lora = 0, qk_nope = 0, qk_rope = 0, v_head = 0;
  bool causal = true;  ///< false: bidirectional (vision towers, action experts)
  bool rope = true;    ///< rotary position embedding on q and k

  /// Per-head width of q and k, of v, the heads k/v have, and the rotated width per head.
  std::int64_t qk_dim() const { return kind == AttentionKind::mla ? qk_nope + qk_rope : head_dim; }
  std::int64_t v_dim() const { return kind == AttentionKind::mla ? v_head : head_dim; }
  std::int64_t k_heads() const { return kind == AttentionKind::mla ? heads : kv_heads; }
  std::int64_t rope_dim() const { return kind == AttentionKind::mla ? qk_rope : head_dim; }
  bool operator==(const AttentionGeometry& o) const;
};

struct MoeGeometry {
  /// Routed experts per token; the work model caps it at the experts a layer has.
  std::int64_t top_k = 2;
  RouterScoring scoring = RouterScoring::softmax;
  /// Child names inside the MoE module: the router linear, the experts' container, and the
  /// shared expert(s) module ("" = none).
  std::string router = "gate", experts = "experts", shared;
  bool operator==(const MoeGeometry& o) const;
};

struct StackGeometry {
  std::string name;    ///< "text", "vision", "action", ...
  std::string blocks;  ///< module path of the block container ("" = the root)
  bool single_block = false;
  TokenStream tokens = TokenStream::text;
  std::int64_t hidden = 0;         ///< residual-stream width
  NormKind norm = NormKind::none;  ///< pre-norm before attention and before the MLP
  bool residual = true;            ///< residual adds after attention and after the MLP
  AttentionGeometry attention;     ///< kind none: no attention in these blocks
  std::vector<std::string> attention_modules, mlp_modules;
  Activation activation = Activation::none;  ///< of the MLP and of every expert
  std::optional<MoeGeometry> moe;            ///< blocks whose MLP module holds `experts`
  bool operator==(const StackGeometry& o) const;
};

struct ModelGeometry {
  std::vector<StackGeometry> stacks;  ///< in forward order
  /// Module paths: the input embedding (lookup), the final norm, the output head (its linear
  /// gives the logits, followed by the cross-entropy over its rows = the vocabulary). "" = none.
  std::string embedding, final_norm, head;
  NormKind final_norm_kind = NormKind::none;
  /// Tokens per sample of the non-text streams (the text stream has --seq-len).
  std::int64_t vision_tokens = 0, action_tokens = 0;
  /// Token stream of linears outside every stack, by module-path prefix (longest wins; text
  /// when none matches).
  std::vector<std::pair<std::string, TokenStream>> streams;
  bool operator==(const ModelGeometry& o) const;

  /// The stack whose blocks hold module `path`, if any.
  const StackGeometry* stack_of(const ModuleTree& tree, std::string_view path) const;
  /// Routed experts per token of the MoE layer whose experts' container is `experts_path`
  /// (min(top_k, experts)); nullopt when no stack routes there.
  std::optional<std::int64_t> routed_top_k(const ModuleTree& tree,
                                           std::string_view experts_path) const;
  /// Stream of a module outside the stacks (by `streams`).
  TokenStream stream_of(std::string_view path) const;
};

/// Module ids of a stack's blocks, in order (InputError naming the path when absent).
std::vector<int> stack_blocks(const StackGeometry& s, const ModuleTree& tree);

/// Checks `g` against a finalized `tree`: positive widths, heads dividing as needed, every
/// named module present. Throws InputError "<source>: geometry: ..." (one line).
void validate_geometry(const ModelGeometry& g, const ModuleTree& tree, std::string_view source);

/// Marks every routed-expert container of `tree` with its geometry's top-k
/// (Module::routed_top_k), which the engine's synthetic data routes by.
void mark_routed_experts(const ModelGeometry& g, ModuleTree& tree);

/// Whether `path` equals `prefix` or lies under it ("" is under everything).
bool path_under(std::string_view path, std::string_view prefix);

}  // namespace dmuon::model
