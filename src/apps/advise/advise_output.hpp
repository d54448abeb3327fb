#pragma once
// What dmuon_advise prints and writes: the ranked table, the JSON object, and the winner as a
// config file that dmuon_bench --config and dmuon_project --config accept.

#include <nlohmann/json.hpp>
#include <string>

#include "advise/search.hpp"
#include "dmuon/project/machine_model.hpp"
#include "options/run_options.hpp"

namespace dmuon::apps::advise {

struct AdviseContext {
  std::string model;  ///< "deepseek-v3 (moe-llm)", or the topology file
  const dmuon::project::Machine* machine = nullptr;
  int world = 0;
  double capacity_gb = 0;       ///< 0: no cap
  std::string capacity_source;  ///< "machine", "--memory-cap"
  const RunOptions* base = nullptr;
};

std::string advise_table(const AdviseContext& ctx, const SearchResult& r, int top);

nlohmann::json advise_json(const AdviseContext& ctx, const SearchResult& r, int top);

/// The winner as YAML config keys (dmuon_bench's), with a header saying how to reproduce it.
std::string winner_config(const AdviseContext& ctx, const SearchResult& r);

}  // namespace dmuon::apps::advise
