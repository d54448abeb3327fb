#include "options/tool_options.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>

#include "common/plan_setup.hpp"
#include "common/run_main.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/config/config_file.hpp"
#include "options/option_parser.hpp"
#include "options/run_option_outputs.hpp"
#include "options/run_option_rules.hpp"
#include "options/run_option_table.hpp"

namespace dmuon::apps::options {
namespace {

// A flag of another tool's (--machine to dmuon_bench): said so in one line naming the tools
// that take it, where CLI11 would only call it "not expected".
void reject_other_tools_flags(Tool tool, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag.rfind("--", 0) != 0) continue;
    flag = flag.substr(0, flag.find('='));
    for (const auto& row : run_option_table()) {
      if (row.flag != flag || (row.tools & tool) != 0) continue;
      std::vector<std::string> takers;
      for (Tool t : {kInspect, kBench, kProject, kAdvise})
        if (row.tools & t) takers.push_back(tool_name(t));
      const std::string last = takers.back();
      takers.pop_back();
      const std::string owners =
          takers.empty() ? last : fmt::format("{} and {}", fmt::join(takers, ", "), last);
      throw InputError(
          fmt::format("{} is an option of {}, not of {} (valid: the options {} --help lists)", flag,
                      owners, tool_name(tool), tool_name(tool)));
    }
  }
}

}  // namespace

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
  reject_other_tools_flags(tool, args.argc(), args.argv());
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
