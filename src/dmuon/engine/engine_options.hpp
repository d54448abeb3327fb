#pragma once
// What one engine run does: method, resharding mode, synthetic compute, batch and step counts.
// Validated before the first collective so every rank rejects bad input alike (exit 2).

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "dmuon/plan/comm_volume.hpp"

namespace dmuon::engine {

/// The training schemes compared on one topology (SPEC §6, §8).
enum class Method {
  dmuon,       ///< owner-based Muon: packed broadcasts, reduce(avg) to the owner, NS on owners
  fsdp_adamw,  ///< everything sharded, AdamW on shards
  fsdp_muon,   ///< sharded; all-gather each full (Nesterov) gradient, NS on every rank
  ddp_muon,    ///< full replicas, all-reduce(avg) gradients, NS on every rank
};
const char* method_name(Method m);
/// "dmuon" | "fsdp-adamw" | "fsdp-muon" | "ddp-muon"; throws InputError otherwise.
Method parse_method(std::string_view s);
/// Each entry may be a comma list; empty entries are ignored; duplicates kept in order.
std::vector<Method> parse_method_list(const std::vector<std::string>& args);

/// Synthetic per-Linear compute (see synthetic.hpp) or none (deterministic synthetic grads).
enum class Compute { gemm, none };
const char* compute_name(Compute c);
Compute parse_compute(std::string_view s);

struct EngineOptions {
  Method method = Method::dmuon;
  plan::Reshard reshard = plan::Reshard::z3;
  /// dmuon: one reduce per parameter (the reference) or per (site, owner) packed buffer.
  plan::GradReduce grad_reduce = plan::GradReduce::per_param;
  /// Weight collectives (broadcasts / all-gathers) kept in flight ahead of the group being
  /// computed: 0 = issue each group's just before its compute; k = also the next k groups.
  int prefetch = 0;
  Compute compute = Compute::gemm;
  std::int64_t tokens = 64;        ///< per rank; used when global_tokens == 0
  std::int64_t global_tokens = 0;  ///< global batch in samples; 0 = tokens x G
  int steps = 5;                   ///< measured steps (after warmup)
  int warmup = 1;                  ///< unmeasured steps first
  std::uint64_t seed = 1;
  bool check = false;        ///< compare with a one-process recomputation on rank 0
  int inject_nan_step = -1;  ///< test aid: poison a gradient on the last rank at this step
  /// Max Frobenius relative error per parameter accepted by --check. fp32 sums of the same
  /// samples in another order differ by ~1e-7 relative; Newton–Schulz's normalisation and
  /// quintic iterations amplify that by O(10–100) over a few steps: 1e-4 leaves ~10x margin.
  double check_tolerance = 1e-4;
  /// Called on every rank after each step (1-based step, total steps incl. warmup); progress
  /// display. Must not communicate.
  std::function<void(int, int)> on_step;

  int total_steps() const { return warmup + steps; }
  /// Global samples for a world of G shard ranks.
  std::int64_t global_samples(int shard) const {
    return global_tokens > 0 ? global_tokens : tokens * shard;
  }
};

/// Throws InputError (one line) for values no run can use.
void validate(const EngineOptions& o, int world_size);

}  // namespace dmuon::engine
