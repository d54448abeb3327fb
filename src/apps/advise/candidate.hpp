#pragma once
// One point of the advisor's search: a value for each knob, the options of the option table
// marked Shown::kKnob (hook boundary, owner strategy and cost model, pack threshold, R,
// Z2/Z3, prefetch depth, wire dtype, micro-batch, activation checkpointing). Each value is the
// text its flag takes, so a candidate is also a command line and a config file.
//
// The micro-batch knob carries --accum with it: a candidate's accum is set so that micro-batch
// x accum, the samples per rank and optimizer step, stays the start's (a smaller micro-batch
// at the same global batch; the training is the same). It counts as one knob. So does the
// context-parallel size C (--cp): C ranks share each sequence, so the data-parallel ranks are
// world / (T x C) and accum / C stays (C x 2 doubles the accum); each rank's tokens per step,
// S / C x micro-batch x accum, stay too.

#include <cstdint>
#include <string>
#include <vector>

#include "dmuon/model/module_tree.hpp"
#include "options/run_option_table.hpp"

namespace dmuon::apps::advise {

/// The knobs, in table order.
const std::vector<const options::RunOption*>& knobs();
/// The index of the knob with config key `key` (std::logic_error when there is none).
std::size_t knob(const std::string& key);

struct Candidate {
  /// Per knob, its value as its flag's text; the boundary knob holds a resolved spec, run
  /// strict.
  std::vector<std::string> values;
  /// --accum, paired with the micro-batch and CP knobs (micro-batch x accum / C constant).
  int accum = 1;

  const std::string& value(std::size_t k) const { return values.at(k); }
  const std::string& value(const std::string& key) const { return values.at(knob(key)); }
  /// The candidate with knob `k` set to `text`; the micro-batch and CP knobs rescale `accum`
  /// so that micro-batch x accum / C stays (std::logic_error when no whole accum does).
  Candidate with(std::size_t k, const std::string& text) const;
  /// Canonical text naming every knob: equal keys, equal runs.
  std::string key() const;
  /// `base` with every knob set as its flag would set it (InputError on a bad value).
  RunOptions apply(const RunOptions& base) const;
};

/// The knobs' values in `o` (one boundary, one owner strategy: the tool's rules hold it so);
/// `boundary` is the start's resolved boundary spec.
Candidate candidate_of(const RunOptions& o, const std::string& boundary);

/// "boundary=types:Block, replicate=4, reshard=z2" for the knobs where `c` differs from
/// `start`; "start" when none differs.
std::string describe_changes(const Candidate& c, const Candidate& start);
/// How many knobs differ.
int changed_knobs(const Candidate& c, const Candidate& start);

/// The candidate as dmuon_bench / dmuon_project flags ("--boundary=strict:X", "--replicate=4",
/// "--micro-batch=2", "--accum=2"; no --micro-batch without a step work).
std::vector<std::string> candidate_flags(const Candidate& c);
/// What to add to the start's command line to run `c`: "--ac full --micro-batch 1 --accum 4"
/// ("" when nothing differs; --accum once, last, when it moved).
std::string changed_flags(const Candidate& c, const Candidate& start);

/// The micro-batch knob's values for a start of micro-batch `m` and `accum` micro-steps: m, m/2,
/// m/4 and 1, those that divide m and keep accum x m / value within --accum's range, largest
/// first; {m} alone when m <= 1. Each pairs with accum x m / value.
std::vector<std::int64_t> micro_batch_values(std::int64_t m, int accum);

/// The --ep sizes worth a candidate on `world` ranks, E <= work::kMaxEp dividing the world
/// that every routed-expert container splits over (R = T = 1: E = G each rank's own experts,
/// E < G expert groups of G/E; docs/STEP-WORK.md "Expert parallelism"): 1, the largest within
/// one NVLink domain of `domain` ranks (its all-to-alls stay on NVLink), and the largest (the
/// fewest experts per rank). Distinct, ascending: the last is the most memory-saving.
std::vector<std::string> ep_values(const model::ModuleTree& tree, int world, int domain);

/// The CP knob's values for a start of CP size `start` and `accum` micro-steps at sequence
/// length `seq_len` on `world` ranks with TP group `tp`: `start`, then the powers of two up to
/// work::kMaxCp whose 2C chunks (with sequence parallelism, C x lcm(2, T)) divide the sequence,
/// whose C x T divides the world, and whose accum (accum x C / start) is whole and within
/// --accum's range. Which machines and models take --cp at all is the caller's to check.
std::vector<int> cp_values(int start, int accum, std::int64_t seq_len, int world, int tp,
                           bool sequence_parallel);

}  // namespace dmuon::apps::advise
