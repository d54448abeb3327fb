#pragma once
// How many tokens each parameter's linear processes per sample: the tokens of its stream
// (text: the sequence length; vision / action: the geometry's tokens per sample), times k/E for
// a routed expert of an MoE layer routing k of its E experts (balanced routing). The engine's
// synthetic step and the FLOP conventions both count parameter work with it.

#include <cstdint>
#include <optional>

#include "dmuon/model/topology.hpp"

namespace dmuon::work {

/// Experts per token routed to the expert container holding `module`, and its expert count:
/// {k, E} when `module` lies in a routed expert, nullopt otherwise. With a geometry, k =
/// min(top_k, E) of the stack's MoE; without one, the engine's rule k = min(2, E) for any
/// module under a container named "experts".
std::optional<std::pair<std::int64_t, std::int64_t>> routed_expert(const model::Topology& t,
                                                                   int module);

/// Tokens per sample of module `module`'s stream (seq_len without a geometry).
double stream_tokens_per_sample(const model::Topology& t, int module, std::int64_t seq_len);

/// Tokens per sample a linear in `module` processes: stream tokens × k/E for routed experts.
double module_tokens_per_sample(const model::Topology& t, int module, std::int64_t seq_len);

}  // namespace dmuon::work
