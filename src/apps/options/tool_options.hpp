#pragma once
// A tool's command line in one call: --config expanded (its keys are the tool's options), the
// flags the option table registers for the tool parsed and set by their kinds, and the rules
// between options applied. --help, --version and the metadata flags exit right after.

#include <string>

#include "options/option.hpp"
#include "options/run_options.hpp"

namespace dmuon::apps::options {

struct ParsedCommandLine {
  bool exit_now = false;    ///< --help, --version, --list, --options-markdown: done (printed)
  std::string config_path;  ///< the --config file, or ""
};

/// Parses argv into `o` (which holds the tool's defaults). Prints what --help, --version and
/// --list ask for when `print` (rank 0 of an MPI tool); InputError on bad input.
ParsedCommandLine parse_tool_options(Tool tool, const std::string& about, int argc, char** argv,
                                     RunOptions& o, bool print = true);

}  // namespace dmuon::apps::options
