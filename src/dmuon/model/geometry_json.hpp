#pragma once
// The optional "geometry" object of a topology file (topology_file.hpp; docs/STEP-WORK.md):
//
//   "geometry": {"embedding": "model.embed_tokens", "final_norm": "model.norm",
//                "final_norm_kind": "rms", "head": "lm_head",
//                "vision_tokens": 256, "action_tokens": 50,          (per sample, optional)
//                "streams": "action_head=action",                    (optional)
//                "stacks": [{"name": "text", "blocks": "model.layers", "tokens": "text",
//                            "hidden": 4096, "norm": "rms", "residual": true,
//                            "attention": "gqa", "heads": 32, "kv_heads": 8, "head_dim": 128,
//                            "causal": true, "rope": true, "attention_modules": "self_attn",
//                            "mlp_modules": "mlp", "activation": "swiglu",
//                            "moe_top_k": 2, "moe_scoring": "softmax", "moe_router": "gate",
//                            "moe_experts": "experts", "moe_shared": ""}]}
//
// Module lists are comma-separated block-relative prefixes ("*" = the whole block); MLA stacks
// give "q_lora", "kv_lora", "qk_nope", "qk_rope", "v_head" instead of kv_heads/head_dim; a
// stack is MoE when it has "moe_top_k". Objects stay flat so a file nests 4 levels at most.
// Unknown keys and bad values are InputErrors "<source>: geometry...: ..." (one line).

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "dmuon/model/geometry.hpp"

namespace dmuon::model {

/// Parses the "geometry" value (not yet validated against a tree: validate_geometry).
ModelGeometry parse_geometry_json(const nlohmann::ordered_json& value, std::string_view source);

/// The "geometry" value as JSON text (one line per stack), parsing back to `g`.
std::string write_geometry_json(const ModelGeometry& g);

}  // namespace dmuon::model
