#pragma once
// The rules between options, checked once after every value passed its own kind's check:
// options that go together (--seq-len with --micro-batch), exclude each other (--no-pack with
// --pack-threshold), need another (--clip-norm-type needs --clip-norm), or what one tool takes
// only once (dmuon_advise starts from one boundary). Each failure is an InputError naming the
// options.

#include "options/option.hpp"
#include "options/run_options.hpp"

namespace dmuon::apps::options {

/// Checks the rules for `tool` and fills what follows from them: the tool's default methods,
/// tokens per rank from --seq-len x --micro-batch x --accum, the plan's reshard mode,
/// dmuon_inspect's layout and default world size.
void apply_rules(RunOptions& o, Tool tool);

/// Tokens per rank and optimizer step with --seq-len: seq-len x micro-batch x accum. The
/// micro-batch is what one micro-step's forward and backward run (the step work and its
/// activations, docs/STEP-WORK.md), and --accum runs that many micro-steps per step.
std::int64_t step_tokens(const RunOptions& o);

}  // namespace dmuon::apps::options
