#pragma once
// The advisor's search: coordinate descent over the knobs of candidate.hpp from the
// invocation's own choices. Each pass visits the knobs in order and, with the others fixed at
// the best so far, projects every value of one knob and keeps the best; passes repeat until
// one changes nothing. Best = fits the memory cap, then the shortest projected step; while
// nothing fits, the smallest excess. The knobs interact (a finer boundary balances owners,
// which changes what R and Z2 cost), hence the repeated passes; a full grid would be the
// product of every list (millions of projections for a large world).
//
// Boundaries searched: the start's, the default heuristic, the topology's recommended one,
// `types:T` for every repeated non-container module type (per-layer, per-block, per-expert
// predicates: coarser and finer), and every suggestion the degradation detector makes for a
// plan the search builds. Larger replicate sizes than one out of memory are not projected (they
// need more memory per rank). A time limit skips every projection that would overrun it (its
// cost estimated from the plan's sites); the result counts them. A start that does not fit
// searches the memory-saving knobs first, so a busy machine's short search still reaches a
// configuration that fits. The winner: among the fitting candidates within a tolerance of the
// fastest, the fewest changed knobs, then the least memory.

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "advise/candidate.hpp"
#include "advise/evaluator.hpp"
#include "dmuon/model/topology.hpp"

namespace dmuon::apps::advise {

/// The values each knob may take, and the order the search visits the knobs in.
struct SearchSpace {
  std::vector<std::vector<std::string>> values;  ///< per knob (candidate.hpp's knobs())
  std::vector<std::size_t> order;                ///< knob indices, largest expected effect first
  /// Boundary spec -> where it came from ("default", "recommended", "suggested", "type X").
  std::map<std::string, std::string> boundary_origin;
  const std::vector<std::string>& of(std::size_t k) const { return values.at(k); }
  /// Adds a boundary spec (once); `origin` says where it came from.
  void add_boundary(const std::string& spec, const std::string& origin);
};

/// The space around `start` for `topo` on `world` ranks with TP group `tp`; `activations`:
/// the run has a step work (--seq-len), so --ac and the micro-batch (micro_batch_values, each
/// with the accum that keeps the step's batch) are searched; `cp`: the CP sizes to search
/// (cp_values; empty: the start's alone, where the machine or the model takes no --cp).
SearchSpace make_search_space(const model::Topology& topo, const Candidate& start, int world,
                              int nvlink_domain, int tp, bool activations,
                              const std::vector<int>& cp = {});

struct Evaluated {
  Candidate candidate;
  Outcome outcome;
  std::optional<Outcome> baseline;  ///< fsdp-adamw at the same knobs, when projected
  bool dominated = false;  ///< another fitting candidate is no slower and needs no more memory
};

struct SearchResult {
  Candidate start;
  Candidate best;
  std::vector<Evaluated> evaluated;  ///< every distinct candidate, in the order projected
  int passes = 0;
  bool time_limit_hit = false;
  int skipped = 0;            ///< distinct candidates not projected: they would overrun the limit
  int skipped_baselines = 0;  ///< fsdp-adamw rows not projected for the same reason
  /// Candidates not projected because a smaller replicate size R at the same other knobs was
  /// already out of memory: the shard group G = world / (R x T) shrinks as R grows, so each
  /// rank's share of the weights, gradients and optimizer state can only grow.
  int pruned = 0;
  /// Candidates not projected because a smaller CP size at the same other knobs was out of
  /// memory by more than its activations: CP splits only the activations (the parameters,
  /// optimizer state and gradient buffers stay, or grow with the accum it carries), so no
  /// larger C can fit.
  int pruned_cp = 0;
  double wall_s = 0;
  SearchSpace space;
  /// The fastest fitting candidate the descent found; `best` is the winner among those within
  /// the tolerance of it (fewest changed knobs, then least memory), often the same.
  Candidate fastest;
  double tolerance = 0.01;
  /// The start did not fit: these memory-saving knobs (of memory_knob_keys, those with a
  /// choice) were searched first; empty otherwise.
  std::vector<std::string> memory_first;
  /// Candidates considered: the projected ones and the skipped ones.
  int candidates() const { return static_cast<int>(evaluated.size()) + skipped; }
  /// The evaluated entry of `c` (std::logic_error when it was not projected).
  const Evaluated& of(const Candidate& c) const;
  Evaluated& of(const Candidate& c);
};

struct SearchOptions {
  int max_passes = 3;
  double time_limit_s = 180;
  /// Fraction of the fastest step within which candidates count as equally fast.
  double tolerance = 0.01;
  int baselines = 5;  ///< fsdp-adamw projected for the best this many rows (and the start)
  /// Called after every projection with a one-line state ("12 projected, best ...").
  std::function<void(const std::string&)> progress;
};

/// The knobs that save memory, in the order a start that does not fit searches them first:
/// activation checkpointing, the wire dtype, resharding (Z3 frees weights after forward), and
/// last a smaller micro-batch at the same step batch (more micro-steps: every one re-gathers
/// the weights), then context parallelism (more ranks share each sequence: its activations
/// shrink, its ring attention exchanges K and V; docs/ADVISOR.md says why this order).
const std::vector<std::string>& memory_knob_keys();

/// True when `a` is a better outcome than `b` (fits, then faster; else less excess).
bool better(const Outcome& a, const Outcome& b);

SearchResult search(Evaluator& evaluator, const Candidate& start, SearchSpace space,
                    const SearchOptions& options);

/// The fitting, non-dominated candidates, fastest first (at most `top`), for the table.
std::vector<const Evaluated*> ranked(const SearchResult& r, int top);

}  // namespace dmuon::apps::advise
