#pragma once
// What makes an out-of-memory row of dmuon_project fit: the advisor's memory-saving knobs
// (advise/search.hpp memory_knob_keys: activation checkpointing, the wire dtype, Z3), each
// alone and all together, projected at the row's other choices exactly as the advisor
// projects them. Only the changes that fit are listed, with their step and memory.

#include <string>
#include <vector>

#include "bench/bench_run.hpp"
#include "dmuon/model/topology.hpp"
#include "dmuon/project/machine_model.hpp"
#include "options/run_options.hpp"

namespace dmuon::apps::project {

/// "fits with --ac full --comm-dtype bf16: 3012.4 ms, 61.2 GB" per change that fits the
/// machine's memory, fastest first; one line saying none fits (and what the most saving change
/// still needs) when none does. `o`: the invocation's options.
std::vector<std::string> oom_remedies(const RunOptions& o, const model::Topology& topo,
                                      const model::Topology& whole,
                                      const dmuon::project::Machine& machine, int world,
                                      const bench::BenchRun& run);

}  // namespace dmuon::apps::project
