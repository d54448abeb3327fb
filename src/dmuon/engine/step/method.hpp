#pragma once
// The training schemes compared on one topology (SPEC §6, §8) and, in one table, what each
// one's structure is: every place that asks "is this method owner-based?" reads it here.

namespace dmuon::engine {

enum class Method {
  dmuon,       ///< owner-based Muon: packed broadcasts, reduce(avg) to the owner, NS on owners
  fsdp_adamw,  ///< everything sharded, AdamW on shards
  fsdp_muon,   ///< sharded; all-gather each full (Nesterov) gradient, NS on every rank
  ddp_muon,    ///< full replicas, all-reduce(avg) gradients, NS on every rank
  ddp_dmuon,   ///< full replicas; Muon gradients reduce(avg) to the owner, NS on the owner,
               ///< post-step broadcast of the owners' fp32 masters (docs/METRICS.md)
};
inline constexpr Method kAllMethods[] = {Method::dmuon, Method::fsdp_adamw, Method::fsdp_muon,
                                         Method::ddp_muon, Method::ddp_dmuon};

struct MethodTraits {
  /// Dedicated parameters have one owner that runs their optimizer step (packed per (site,
  /// owner)): the method depends on the hook boundary and the owner strategy, and runs once
  /// per boundary and strategy.
  bool owners;
  /// Every rank holds the full model (one group of every rank; no sharding).
  bool replicas;
  /// Dedicated parameters take Muon (fsdp-adamw: AdamW everywhere).
  bool muon;
  /// Its hooks are the reference's (SPEC §3): sites and hook counts audited against the plan.
  bool reference_hooks;
  /// Runs under tensor parallelism (--tp): dmuon (the TP owner's Newton–Schulz on the gathered
  /// logical matrix) and fsdp-adamw (elementwise on the local shards: no TP exchange).
  bool tensor_parallel;
};

inline constexpr MethodTraits traits(Method m) {
  switch (m) {
    case Method::dmuon: return {true, false, true, true, true};
    case Method::fsdp_adamw: return {false, false, false, false, true};
    case Method::fsdp_muon: return {false, false, true, false, false};
    case Method::ddp_muon: return {false, true, true, false, false};
    case Method::ddp_dmuon: return {true, true, true, false, false};
  }
  return {false, false, false, false, false};
}

/// Every rank holds the full model (ddp-muon, ddp-dmuon): one group of all ranks.
inline constexpr bool is_ddp(Method m) {
  return traits(m).replicas;
}

}  // namespace dmuon::engine
