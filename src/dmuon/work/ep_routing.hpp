#pragma once
// How an MoE layer's routed tokens reach their experts' EP ranks (--ep E, docs/STEP-WORK.md
// "Expert parallelism"): which dispatcher moves them, and how a token's k experts spread over
// the E ranks (each holding n/E consecutive experts of n), which sets how many ranks a
// token visits when the dispatcher sends it once per rank (DeepEP).
//
//   dispatcher all-to-all  torchtitan's ExpertParallel: every routed copy (token, expert) is a
//                          row of NCCL all-to-alls, k rows per token whatever the ranks
//   dispatcher deepep      DeepEP's normal kernels as Megatron's and NeMo AutoModel's
//                          MoEFlexTokenDispatcher call them (fused_a2a.py): a token goes once
//                          to every EP rank holding one of its experts (is_token_in_rank),
//                          with its top-k indices and fp32 weights; the combine sends one row
//                          per (token, rank) back and sums them on arrival
//   routing uniform        a token's k experts a uniformly random k-subset (every expert
//                          receives the mean: balanced)
//   routing consecutive    AutoModel's FakeBalancedGate (its public benchmark rows): token t
//                          takes experts (t·k + j) mod n, j < k (balanced too, but k adjacent
//                          experts, so few ranks per token)

#include <cstdint>

namespace dmuon::work {

enum class EpDispatcher { all_to_all, deepep };
enum class ExpertRouting { uniform, consecutive };

/// "all-to-all" | "deepep" (the flag's values).
const char* ep_dispatcher_name(EpDispatcher d);
/// "uniform" | "consecutive".
const char* expert_routing_name(ExpertRouting r);

/// The mean number of distinct EP ranks a token's k = min(top_k, experts) experts lie on, E
/// ranks holding experts/E consecutive experts each (E divides experts):
///   uniform:      E · (1 − C(n − n/E, k) / C(n, k))
///   consecutive:  the mean over t = 0 … n−1 of the ranks experts (t·k + j) mod n span
/// 1 at E = 1. InputError for experts < 1, top_k < 1, or E not dividing experts.
double destination_ranks(std::int64_t experts, std::int64_t top_k, int ep, ExpertRouting routing);

}  // namespace dmuon::work
