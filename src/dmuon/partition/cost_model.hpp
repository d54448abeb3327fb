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

/// max(1, prod(shape)): the size the `optimizer` cost model works with, and only it (SPEC
/// §5: a zero-size parameter counts 0 in numel loads, packing and the `numel` cost model).
/// The shape's product must fit in int64 (ModuleTree checks it).
std::int64_t clamped_numel(const std::vector<std::int64_t>& shape);

/// The reference `optimizer` cost: Newton–Schulz work for matrices, a token cost for
/// embeddings, norms, biases and other non-matrix parameters. Integer arithmetic exactly as
/// the reference (the NS term is computed in 128 bits); a cost beyond int64 is an InputError
/// naming the parameter, never a saturated or wrapped value.
std::int64_t optimizer_cost(std::string_view name, const std::vector<std::int64_t>& shape);

/// Cost of a parameter under `model` (numel model: prod(shape), unclamped, so 0 for a
/// zero-size parameter).
std::int64_t parameter_cost(CostModel model, std::string_view name,
                            const std::vector<std::int64_t>& shape);

}  // namespace dmuon::partition
