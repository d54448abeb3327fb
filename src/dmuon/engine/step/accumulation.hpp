#pragma once
// Gradient accumulation (--accum K): one step runs K micro-steps of forward + backward and one
// optimizer step. Rule implemented, as PyTorch's no_sync() / FSDP do:
//   * the step's global batch (--global-tokens, or --tokens × G) is SPLIT into K micro-batches:
//     a parameter training on n global samples sees samples [j·n/K, (j+1)·n/K) in micro-step
//     j, each rank its 1/G part of them (micro_sample_range); --tokens stays per step;
//   * the loss is averaged over the WHOLE batch: every micro-step scales by 1/n (n = the step's
//     samples), so the accumulated gradient equals the one-micro-step gradient of the same
//     batch up to rounding (Compute::none: each micro-step adds (u + w)/K);
//   * gradients accumulate locally; the reduces (dmuon reduce to owner, reduce-scatter,
//     all-reduce, HSDP stage 2) run once, after the last micro-step's backward;
//   * weights move every micro-step: Z3 broadcasts / all-gathers before forward AND before
//     backward, K times; Z2 broadcasts / all-gathers before forward, K times (FSDP SHARD_GRAD_OP
//     keeps parameters gathered from forward to backward but reshards after backward);
//   * hooks: all four per site fire in every micro-step; the backward-post hook communicates
//     in the last micro-step only.
// Per step: weight collectives × K, reduces × 1, optimizer collectives × 1 (the audit's
// formula applies it: step_volume.hpp).

#include <cstdint>
#include <string_view>

#include "dmuon/engine/step/synthetic.hpp"

namespace dmuon::engine {

/// "--accum" text: an integer 1..kMaxAccum; InputError (one line) otherwise.
int parse_accum(std::string_view text);

/// Rank `rank` of `ranks`'s samples in micro-step `micro` of `accum` of a parameter training on
/// n samples per step; n stays the step's count (the loss scale).
SampleRange micro_sample_range(std::int64_t n, int micro, int accum, int rank, int ranks);

}  // namespace dmuon::engine
