#pragma once
// The command line of a tool, generated from an option table: every row tagged for the tool
// becomes a CLI11 option (names, help with its default, what is valid), and after parsing the
// given ones are parsed by their kind and set on the target, in table order. Which options
// were given (on the command line or by --config) is kept here, once, instead of a `_given`
// shadow per field.

#include <CLI/CLI.hpp>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "options/option.hpp"

namespace dmuon::apps::options {

/// A switch's texts ("true" when given bare; --flag=false from a config is not passed at all):
/// true, or an error naming the flag for anything but true/false.
bool switch_on(const std::string& flag, const std::vector<std::string>& results);

template <class T>
class OptionParser {
 public:
  /// Registers `table`'s rows for `tool` on `app`; --help shows each default as `defaults`
  /// holds it (the tool's own defaults set before).
  OptionParser(CLI::App& app, const std::vector<Option<T>>& table, Tool tool, const T& defaults) {
    for (const auto& option : table) {
      if (!option.for_tool(tool)) continue;
      const std::string names =
          option.alias.empty() ? option.flag : option.flag + "," + option.alias;
      CLI::Option* cli = nullptr;
      if (option.arity == Arity::flag) {
        cli = app.add_flag(names, option.help);
      } else {
        cli =
            app.add_option(names, CLI::callback_t{}, option.help)
                ->type_size(1)
                ->expected(1)
                ->allow_extra_args(false)
                ->type_name(option.type_name)
                ->multi_option_policy(option.arity == Arity::list ? CLI::MultiOptionPolicy::TakeAll
                                                                  : CLI::MultiOptionPolicy::Throw);
        const std::string shown = option.text(defaults);
        if (!shown.empty()) cli->default_str(shown);
      }
      cli->group(option.group);
      rows_.push_back({&option, cli});
    }
  }

  /// After app.parse(): sets every given option on `target` (InputError on a bad value).
  void apply(T& target) {
    given_.clear();
    for (const auto& [option, cli] : rows_) {
      if (cli->count() == 0) continue;
      std::vector<std::string> texts(cli->results().begin(), cli->results().end());
      if (option->arity == Arity::flag) {
        if (!switch_on(option->flag, texts)) continue;
        texts = {"true"};
      } else if (texts.empty()) {
        texts = {""};  // CLI11 drops an empty argument: the kind names it
      }
      option->set(target, texts, option->flag);
      given_.insert(option->key_name());
    }
  }

  const std::set<std::string>& given() const { return given_; }

 private:
  struct Row {
    const Option<T>* option;
    CLI::Option* cli;
  };
  std::vector<Row> rows_;
  std::set<std::string> given_;
};

}  // namespace dmuon::apps::options
