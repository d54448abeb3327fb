#pragma once
// The option table of dmuon_inspect, dmuon_bench, dmuon_project and dmuon_advise: one row per
// option (option.hpp). docs/OPTIONS.md is generated from it (dmuon_inspect
// --options-markdown; a test fails when the committed file is stale).

#include <vector>

#include "options/option.hpp"
#include "options/run_options.hpp"

namespace dmuon::apps::options {

using RunOption = Option<RunOptions>;

/// Every row, in --help and documentation order.
const std::vector<RunOption>& run_option_table();

/// The row whose config key is `key` (InputError when there is none).
const RunOption& run_option(const std::string& key);

}  // namespace dmuon::apps::options
