#include "dmuon/model/geometry_json.hpp"

#include <fmt/format.h>

#include <initializer_list>
#include <limits>

#include "dmuon/base/comma_list.hpp"
#include "dmuon/base/error.hpp"

namespace dmuon::model {
namespace {

using Json = nlohmann::ordered_json;

// Reads one flat JSON object, naming `where` in every error.
class ObjectReader {
 public:
  ObjectReader(const Json& obj, std::string where, std::string_view source,
               std::initializer_list<const char*> valid)
      : obj_(obj), where_(std::move(where)), source_(source) {
    if (!obj.is_object()) fail("must be an object");
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      bool ok = false;
      std::string list;
      for (const char* v : valid) {
        ok = ok || it.key() == v;
        list += (list.empty() ? "" : ", ") + std::string(v);
      }
      if (!ok) fail(fmt::format("unknown key \"{}\" (valid: {})", it.key(), list));
    }
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(fmt::format("{}: {}: {}", source_, where_, what));
  }
  bool has(const char* key) const { return obj_.contains(key); }

  std::string text(const char* key, const std::string& fallback = "") const {
    if (!has(key)) return fallback;
    const Json& v = obj_.at(key);
    if (!v.is_string()) fail(fmt::format("\"{}\" must be a string, got {}", key, v.dump()));
    return v.get<std::string>();
  }
  std::int64_t integer(const char* key, std::int64_t fallback = 0) const {
    if (!has(key)) return fallback;
    const Json& v = obj_.at(key);
    if (!v.is_number_integer() ||
        (v.is_number_unsigned() &&
         v.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<std::int64_t>::max())))
      fail(fmt::format("\"{}\" is {} (must be an integer)", key, v.dump()));
    return v.get<std::int64_t>();
  }
  bool flag(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    const Json& v = obj_.at(key);
    if (!v.is_boolean()) fail(fmt::format("\"{}\" is {} (must be true or false)", key, v.dump()));
    return v.get<bool>();
  }
  // Parses an enum-valued string with `parse`, prefixing its InputError with `where`.
  template <class Parse>
  auto choice(const char* key, const char* fallback, Parse parse) const {
    try {
      return parse(text(key, fallback));
    } catch (const InputError& e) {
      fail(fmt::format("\"{}\": {}", key, e.what()));
    }
  }
  const Json& at(const char* key) const { return obj_.at(key); }

 private:
  const Json& obj_;
  std::string where_;
  std::string_view source_;
};

std::vector<std::string> prefixes(const std::string& list) {
  std::vector<std::string> out = split_comma_lists({list});
  for (auto& p : out)
    if (p == "*") p.clear();
  return out;
}

std::string prefix_list(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& p : v) s += (s.empty() ? "" : ",") + (p.empty() ? std::string("*") : p);
  return s;
}

AttentionGeometry parse_attention(const ObjectReader& r) {
  AttentionGeometry a;
  a.kind = r.choice("attention", "none", parse_attention_kind);
  a.heads = r.integer("heads");
  a.kv_heads = r.integer("kv_heads", a.kind == AttentionKind::gqa ? a.heads : 0);  // MHA default
  a.head_dim = r.integer("head_dim");
  a.q_lora = r.integer("q_lora");
  a.kv_lora = r.integer("kv_lora");
  a.qk_nope = r.integer("qk_nope");
  a.qk_rope = r.integer("qk_rope");
  a.v_head = r.integer("v_head");
  a.causal = r.flag("causal", true);
  a.rope = r.flag("rope", true);
  return a;
}

StackGeometry parse_stack(const Json& j, std::size_t k, std::string_view source) {
  const ObjectReader r(j, fmt::format("geometry.stacks[{}]", k), source,
                       {"name",        "blocks",    "single_block",      "tokens",
                        "hidden",      "norm",      "residual",          "attention",
                        "heads",       "kv_heads",  "head_dim",          "q_lora",
                        "kv_lora",     "qk_nope",   "qk_rope",           "v_head",
                        "causal",      "rope",      "attention_modules", "mlp_modules",
                        "activation",  "moe_top_k", "moe_scoring",       "moe_router",
                        "moe_experts", "moe_shared"});
  StackGeometry s;
  s.name = r.text("name", fmt::format("stack{}", k));
  if (!r.has("blocks")) r.fail("missing \"blocks\" (the module path of the block container)");
  s.blocks = r.text("blocks");
  s.single_block = r.flag("single_block", false);
  s.tokens = r.choice("tokens", "text", parse_token_stream);
  s.hidden = r.integer("hidden");
  s.norm = r.choice("norm", "none", parse_norm_kind);
  s.residual = r.flag("residual", true);
  s.attention = parse_attention(r);
  s.attention_modules = prefixes(r.text("attention_modules"));
  s.mlp_modules = prefixes(r.text("mlp_modules"));
  s.activation = r.choice("activation", "none", parse_activation);
  if (r.has("moe_top_k")) {
    MoeGeometry m;
    m.top_k = r.integer("moe_top_k");
    m.scoring = r.choice("moe_scoring", "softmax", parse_router_scoring);
    m.router = r.text("moe_router", m.router);
    m.experts = r.text("moe_experts", m.experts);
    m.shared = r.text("moe_shared");
    s.moe = m;
  } else if (r.has("moe_scoring") || r.has("moe_router") || r.has("moe_experts") ||
             r.has("moe_shared")) {
    r.fail("moe_* keys need \"moe_top_k\" (the routed experts per token)");
  }
  return s;
}

std::vector<std::pair<std::string, TokenStream>> parse_streams(const ObjectReader& r) {
  std::vector<std::pair<std::string, TokenStream>> out;
  for (const auto& item : split_comma_lists({r.text("streams")})) {
    const auto eq = item.find('=');
    if (eq == std::string::npos)
      r.fail(fmt::format("\"streams\" item '{}' must be PREFIX=STREAM", item));
    try {
      out.emplace_back(item.substr(0, eq), parse_token_stream(item.substr(eq + 1)));
    } catch (const InputError& e) {
      r.fail(fmt::format("\"streams\": {}", e.what()));
    }
  }
  return out;
}

std::string json_string(const std::string& s) {
  return Json(s).dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string attention_fields(const AttentionGeometry& a) {
  if (a.kind == AttentionKind::none) return "";
  std::string s =
      fmt::format(", \"attention\": \"{}\", \"heads\": {}", attention_kind_name(a.kind), a.heads);
  if (a.kind == AttentionKind::gqa)
    s += fmt::format(", \"kv_heads\": {}, \"head_dim\": {}", a.kv_heads, a.head_dim);
  else
    s += fmt::format(
        ", \"q_lora\": {}, \"kv_lora\": {}, \"qk_nope\": {}, \"qk_rope\": {}, \"v_head\": {}",
        a.q_lora, a.kv_lora, a.qk_nope, a.qk_rope, a.v_head);
  return s + fmt::format(", \"causal\": {}, \"rope\": {}", a.causal, a.rope);
}

std::string stack_json(const StackGeometry& s) {
  std::string out = fmt::format(
      "{{\"name\": {}, \"blocks\": {}, \"single_block\": {}, \"tokens\": \"{}\", \"hidden\": {}, "
      "\"norm\": \"{}\", \"residual\": {}{}, \"attention_modules\": {}, \"mlp_modules\": {}, "
      "\"activation\": \"{}\"",
      json_string(s.name), json_string(s.blocks), s.single_block, token_stream_name(s.tokens),
      s.hidden, norm_kind_name(s.norm), s.residual, attention_fields(s.attention),
      json_string(prefix_list(s.attention_modules)), json_string(prefix_list(s.mlp_modules)),
      activation_name(s.activation));
  if (s.moe)
    out += fmt::format(
        ", \"moe_top_k\": {}, \"moe_scoring\": \"{}\", \"moe_router\": {}, \"moe_experts\": {}, "
        "\"moe_shared\": {}",
        s.moe->top_k, router_scoring_name(s.moe->scoring), json_string(s.moe->router),
        json_string(s.moe->experts), json_string(s.moe->shared));
  return out + "}";
}

}  // namespace

ModelGeometry parse_geometry_json(const Json& value, std::string_view source) {
  const ObjectReader r(value, "geometry", source,
                       {"embedding", "final_norm", "final_norm_kind", "head", "vision_tokens",
                        "action_tokens", "streams", "stacks"});
  ModelGeometry g;
  g.embedding = r.text("embedding");
  g.final_norm = r.text("final_norm");
  g.final_norm_kind = r.choice("final_norm_kind", "none", parse_norm_kind);
  g.head = r.text("head");
  g.vision_tokens = r.integer("vision_tokens");
  g.action_tokens = r.integer("action_tokens");
  g.streams = parse_streams(r);
  if (!r.has("stacks")) r.fail("missing \"stacks\" (an array of stacks of blocks)");
  const Json& stacks = r.at("stacks");
  if (!stacks.is_array()) r.fail("\"stacks\" must be an array");
  for (std::size_t k = 0; k < stacks.size(); ++k)
    g.stacks.push_back(parse_stack(stacks[k], k, source));
  return g;
}

std::string write_geometry_json(const ModelGeometry& g) {
  std::string streams;
  for (const auto& [prefix, s] : g.streams)
    streams += (streams.empty() ? "" : ",") + prefix + "=" + token_stream_name(s);
  std::string out = fmt::format(
      "{{\"embedding\": {}, \"final_norm\": {}, \"final_norm_kind\": \"{}\", \"head\": {}, "
      "\"vision_tokens\": {}, \"action_tokens\": {}, \"streams\": {},\n    \"stacks\": [",
      json_string(g.embedding), json_string(g.final_norm), norm_kind_name(g.final_norm_kind),
      json_string(g.head), g.vision_tokens, g.action_tokens, json_string(streams));
  for (std::size_t k = 0; k < g.stacks.size(); ++k)
    out += (k ? ",\n      " : "\n      ") + stack_json(g.stacks[k]);
  return out + "]}";
}

}  // namespace dmuon::model
