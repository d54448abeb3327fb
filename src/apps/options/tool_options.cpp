#include "options/tool_options.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "common/plan_setup.hpp"
#include "common/run_main.hpp"
#include "dmuon/config/config_file.hpp"
#include "options/option_parser.hpp"
#include "options/run_option_outputs.hpp"
#include "options/run_option_rules.hpp"
#include "options/run_option_table.hpp"

namespace dmuon::apps::options {

ParsedCommandLine parse_tool_options(Tool tool, const std::string& about, int argc, char** argv,
                                     RunOptions& o, bool print) {
  ParsedCommandLine out;
  const auto keys = config_keys(tool);
  config::ExpandedArgs args(argc, argv, keys);
  out.config_path = args.config_path();
  CLI::App app{about};
  app.add_option("--config", "YAML config file (keys = these flags; flags given here win)");
  bool markdown = false;
  if (tool == kInspect)
    app.add_flag("--options-markdown", markdown,
                 "print docs/OPTIONS.md (every option of every tool, from the option table)");
  OptionParser<RunOptions> parser(app, run_option_table(), tool, o);
  if (!parse_cli(app, args.argc(), args.argv(), print)) {
    out.exit_now = true;
    return out;
  }
  parser.apply(o);
  o.given = parser.given();
  if (markdown || o.list) {
    if (print) fmt::print("{}", markdown ? options_markdown() : list_topologies_text());
    out.exit_now = true;
    return out;
  }
  apply_rules(o, tool);
  return out;
}

}  // namespace dmuon::apps::options
