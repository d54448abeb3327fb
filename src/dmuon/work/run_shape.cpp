#include "dmuon/work/run_shape.hpp"

#include <fmt/format.h>

#include <numeric>

#include "dmuon/base/error.hpp"
#include "dmuon/boundary/tp_shard.hpp"

namespace dmuon::work {

const char* ac_policy_name(AcPolicy p) {
  switch (p) {
    case AcPolicy::none: return "none";
    case AcPolicy::selective: return "selective";
    case AcPolicy::selective_layer: return "selective-layer";
    case AcPolicy::full: return "full";
    case AcPolicy::core_attn: return "core-attn";
  }
  return "?";
}

AcPolicy parse_ac_policy(std::string_view s) {
  for (auto p : {AcPolicy::none, AcPolicy::selective, AcPolicy::selective_layer, AcPolicy::full,
                 AcPolicy::core_attn})
    if (s == ac_policy_name(p)) return p;
  throw InputError(fmt::format(
      "unknown activation checkpointing '{}' (valid: none, selective, selective-layer, full, "
      "core-attn)",
      s));
}

const char* fusion_name(Fusion f) {
  return f == Fusion::fused ? "fused" : "eager";
}

Fusion parse_fusion(std::string_view s) {
  if (s == "fused") return Fusion::fused;
  if (s == "eager") return Fusion::eager;
  throw InputError(fmt::format("unknown kernel fusion '{}' (valid: fused, eager)", s));
}

void validate_run_shape(const RunShape& s) {
  if (s.seq_len < 1)
    throw InputError(fmt::format("sequence length {} is invalid (must be >= 1)", s.seq_len));
  if (s.micro_batch < 1)
    throw InputError(fmt::format("micro-batch {} is invalid (must be >= 1)", s.micro_batch));
  // Tokens, and the s^2 score counts formed from them, stay exact in a double.
  if (s.seq_len > (std::int64_t{1} << 24) || s.micro_batch > (std::int64_t{1} << 24))
    throw InputError(
        fmt::format("sequence length {} x micro-batch {} is too large (each must be "
                    "<= 16777216)",
                    s.seq_len, s.micro_batch));
  if (s.tp.size < 1 || s.tp.size > boundary::kMaxTp)
    throw InputError(
        fmt::format("TP size {} is invalid (valid: 1..{})", s.tp.size, boundary::kMaxTp));
  if (s.tp.sequence && s.tp.size == 1)
    throw InputError("--sequence-parallel needs --tp T > 1 (it splits the TP group's tokens)");
  if (s.ep.size < 1 || s.ep.size > kMaxEp)
    throw InputError(fmt::format("--ep {} is invalid (valid: 1..{})", s.ep.size, kMaxEp));
  if (s.cp.size < 1 || s.cp.size > kMaxCp)
    throw InputError(fmt::format("--cp {} is invalid (valid: 1..{})", s.cp.size, kMaxCp));
  // The causal load balance cuts every sequence into 2C chunks.
  if (s.cp.size > 1 && s.seq_len % (2 * s.cp.size) != 0)
    throw InputError(
        fmt::format("--seq-len {} does not split into the 2 x {} chunks of --cp {} "
                    "(valid: a multiple of {})",
                    s.seq_len, s.cp.size, s.cp.size, 2 * s.cp.size));
  // Sequence parallelism splits a rank's tokens of each sequence (S/C under CP) over T.
  if (s.tp.sequence && s.local_seq_len() % s.tp.size != 0)
    throw InputError(fmt::format(
        "--seq-len {}{} does not split over the {} ranks of --sequence-parallel (valid: a "
        "multiple of {})",
        s.seq_len, s.cp.size > 1 ? fmt::format(" / --cp {}", s.cp.size) : std::string(), s.tp.size,
        s.cp.size > 1 ? s.cp.size * std::lcm(2, s.tp.size) : s.tp.size));
}

}  // namespace dmuon::work
