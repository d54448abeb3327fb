#pragma once
// Global-norm gradient clipping (--clip-norm X, --clip-norm-type 2|inf), as PyTorch's
// torch.nn.utils.clip_grad_norm_ does it: total = ‖all gradients‖ (the 2-norm of every element,
// or the max |element|), coef = X / (total + 1e-6) clamped to at most 1, every gradient × coef,
// before the optimizer reads it.
//
// Distributed, each gradient element the optimizer consumes is counted exactly once over the
// world (clip_counted): DMuon-dedicated parameters on their owner (the reduced gradient exists
// there only; with HSDP after stage 2, on the owner's row), sharded parameters (FSDP, dmuon's
// non-dedicated unit) by their shard in row 0 only (after HSDP's stage-2 all-reduce every row
// holds the same shard), DDP replicas by a 1/N slice per rank. Each rank sums the squares (or
// takes the max) of what it counts into one fp32 scalar; ONE all-reduce (sum or max) of that
// scalar over the world gives every rank the total; then every rank scales every gradient it
// consumes (all rows, every replica). With --tp T the world is R×G×T and the norm is the
// logical model's: a TP-sharded parameter's T shards are counted by their T DP groups (each
// its own shard, as above), every other parameter (held whole by every TP index) by TP index 0
// only. Cost: +1 all_reduce call per rank per step; its logical
// payload, under the counter convention (comm/collective_counters.hpp), is
// floor(1·(N−1)/N)·4 = 0 bytes: a one-element all-reduce moves no chunk.

#include <cstdint>
#include <string_view>
#include <vector>

#include "dmuon/engine/step/engine_options.hpp"
#include "dmuon/engine/step/step_layout.hpp"

namespace dmuon::engine {

/// A finite number > 0; InputError (one line, naming the text) otherwise.
double parse_clip_norm(std::string_view text);
/// "2" | "inf"; InputError otherwise.
ClipNormType parse_clip_norm_type(std::string_view text);
const char* clip_norm_type_name(ClipNormType t);
/// "none" or "<X>:<type>" (e.g. "1:2"): how results files and the run key record it.
std::string clip_label(const EngineOptions& o);

/// The elements [begin, begin + count) of parameter p's consumed gradient (the owner's reduced
/// gradient, the shard, the replica) that this rank counts in the norm; count 0: none.
struct ClipSpan {
  std::int64_t begin = 0;
  std::int64_t count = 0;
};
ClipSpan clip_counted(const StepLayout& layout, const ParamLayout& p);

/// One gradient of a one-process reference: n fp32 values at g.
struct GradSpan {
  float* g = nullptr;
  std::int64_t n = 0;
};
/// clip_grad_norm_ in one process (the --check references): the norm over every element of
/// `grads` (each counted once), in an fp32 scalar as the engine's all-reduce carries it, then
/// every element × the coefficient (nothing when it is 1). Requires o.clip_norm > 0.
void clip_in_place(const EngineOptions& o, const std::vector<GradSpan>& grads);

/// Adds n gradient values to a partial norm: their squares (two) or their max |g| (inf).
void clip_accumulate(ClipNormType type, const float* g, std::int64_t n, double& partial);
/// The norm from the world's reduced partial: sqrt (two) or itself (inf).
double clip_total_norm(ClipNormType type, double reduced);
/// min(1, max_norm / (total + 1e-6)) in fp32, as clip_grad_norm_ computes it.
float clip_coefficient(double max_norm, double total);

}  // namespace dmuon::engine
