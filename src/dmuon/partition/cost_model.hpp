#pragma once
// Per-parameter cost used to balance ownership (SPEC §5).

#include <cstdint>
#include <string_view>
#include <vector>

namespace dmuon::partition {

enum class CostModel { optimizer, numel };
const char* cost_model_name(CostModel m);
/// "optimizer" | "numel"; throws InputError otherwise.
CostModel parse_cost_model(std::string_view s);

/// max(1, prod(shape)).
std::int64_t clamped_numel(const std::vector<std::int64_t>& shape);

/// The reference `optimizer` cost: Newton–Schulz work for matrices, a token cost for
/// embeddings, norms, biases and other non-matrix parameters. Integer arithmetic exactly as
/// the reference (the NS term is computed in 128 bits, so no shape can overflow it).
std::int64_t optimizer_cost(std::string_view name, const std::vector<std::int64_t>& shape);

/// Cost of a parameter under `model` (numel model: clamped_numel).
std::int64_t parameter_cost(CostModel model, std::string_view name,
                            const std::vector<std::int64_t>& shape);

}  // namespace dmuon::partition
