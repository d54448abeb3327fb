#pragma once
// What dmuon_project prints of an invocation: the summary (per world and method the fastest
// row that fits), dmuon_bench's table per world with the projection's own columns, and the
// one JSON object (--json).

#include <nlohmann/json.hpp>

#include <string>

#include "project/projection_run.hpp"

namespace dmuon::apps::project {

/// The tables, in the order they are printed.
std::string projection_tables(const Invocation& v);

/// The --json object.
nlohmann::json invocation_json(const Invocation& v);

/// A row's memory terms and peak as JSON (also the advisor's).
nlohmann::json memory_json(const dm::RankMemory& mem, const dm::Machine& m, bool activations);

}  // namespace dmuon::apps::project
