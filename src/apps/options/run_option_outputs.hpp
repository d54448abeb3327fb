#pragma once
// Everything the tools print or write about their options, generated from the option table:
// config keys, the lines ranks agree on, the config a run records (and the advisor's winner),
// the run key's fragments, the options in dmuon_inspect's JSON and docs/OPTIONS.md.

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "common/run_agreement.hpp"
#include "dmuon/config/config_keys.hpp"
#include "options/run_option_table.hpp"

namespace dmuon::apps::options {

/// The keys a --config file of `tool` may hold (one per option of the tool).
std::vector<config::ConfigKey> config_keys(Tool tool);

/// What every rank must have resolved alike (run_agreement.hpp): "key = value" per option of
/// `tool` that the ranks agree on.
void describe_options(const RunOptions& o, Tool tool, RunDescription& d);

/// A config file (YAML) holding the value of every active option that each tool of `tools`
/// takes: what a run records in its results and what `--config` reads back to run it again.
/// Output paths, formats and test aids are left out (Shown::kNoConfig), and so are switches
/// that are off and options without a value (their defaults).
std::string config_yaml(const RunOptions& o, unsigned tools, const std::string& header = "");

/// " --flag value" for every option dmuon_project takes and dmuon_bench does not whose value
/// in `o` is not its default (--attention-kernel, --param-dtype, --momentum-dtype), but
/// --machine and --world-size: what a config both tools read cannot hold and a projection of
/// it needs said beside it.
std::string projection_only_flags(const RunOptions& o);

/// The run key's fragments of one kind (KeyRole::plan or ::run): "label=value" per option of
/// that kind, in table order, leaving out those at their `older` value.
std::string key_fragments(const RunOptions& o, KeyRole::Where where);

/// The options of `tool` marked `shown` as a JSON object (numbers, booleans, lists typed).
nlohmann::json options_json(const RunOptions& o, Tool tool, unsigned shown);

/// docs/OPTIONS.md: every option by group (flag, config key, valid values, default, tools,
/// run key, agreement).
std::string options_markdown();

/// A YAML scalar: plain when it is safe, else double-quoted (JSON escapes are valid YAML).
std::string yaml_scalar(const std::string& s);

}  // namespace dmuon::apps::options
