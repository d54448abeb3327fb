#pragma once
// One point of the advisor's search: the choices dmuon_advise varies (hook boundary, owner
// strategy and cost model, R x G, Z2/Z3, prefetch depth, wire dtype, pack threshold,
// activation checkpointing), each spelled as the flag that sets it, so a candidate is also a
// command line and a config file.

#include <cstdint>
#include <string>
#include <vector>

namespace dmuon::apps::advise {

/// The knobs, in the order the search visits them (largest expected effect first).
enum class Knob {
  boundary,
  replicate,
  reshard,
  prefetch,
  comm_dtype,
  owner_strategy,
  cost_model,
  pack_threshold,
  ac
};
inline constexpr int kKnobCount = 9;
const char* knob_name(Knob k);

struct Candidate {
  std::string boundary = "default";  ///< a --boundary spec (strict), aliases resolved
  std::string owner_strategy = "lpt";
  std::string cost_model = "optimizer";
  int replicate = 1;
  std::string reshard = "z3";
  int prefetch = 1;
  std::string comm_dtype = "fp32";
  std::int64_t pack_threshold = 5'000'000;  ///< 0: --no-pack
  std::string ac = "none";

  /// The value of one knob as its flag's text ("types:Block", "4", "z2", "no-pack").
  std::string value(Knob k) const;
  /// The candidate with knob `k` set from its text (as value() writes it).
  Candidate with(Knob k, const std::string& text) const;
  /// Canonical text naming every knob: equal keys, equal runs.
  std::string key() const;
};

/// "boundary=types:Block, R=4, z2" for the knobs where `c` differs from `start`; "start" when
/// none differs.
std::string describe_changes(const Candidate& c, const Candidate& start);

/// The candidate as dmuon_bench / dmuon_project flags ("--boundary strict:X --replicate 4 ...").
std::vector<std::string> candidate_flags(const Candidate& c);

}  // namespace dmuon::apps::advise
