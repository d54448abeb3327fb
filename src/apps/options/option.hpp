#pragma once
// One row of an option table: everything the tools need to know about one option, written
// once. The flag and its config key, help, the kind of value and its parser (value_kind.hpp),
// the setter into the typed spec it configures, the tools that take it, whether every rank
// must agree on it, where a run's results carry it (so that runs differing in it are told
// apart, and how older files read it), and which outputs show it. The CLI registration, the
// config keys, the agreement lines, the run key, the configs the tools write, the plan JSON,
// the advisor's knobs and docs/OPTIONS.md are all generated from the rows
// (option_parser.hpp, option_outputs.hpp).

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "options/value_kind.hpp"

namespace dmuon::apps::options {

/// The tools an option belongs to (bit set).
enum Tool : unsigned { kInspect = 1, kBench = 2, kProject = 4, kAdvise = 8 };
inline constexpr unsigned kRunTools = kBench | kProject | kAdvise;
inline constexpr unsigned kAllTools = kInspect | kRunTools;
const char* tool_name(Tool t);

enum class Arity {
  flag,  ///< a switch: given or not (config: true/false)
  one,   ///< one value
  list,  ///< repeatable (and, where the row says so, comma lists): the values in order
};

/// What run_agreement compares across ranks before the first collective.
enum class Agree {
  value,     ///< the resolved value (it decides collectives or numbers)
  presence,  ///< only whether it was given (e.g. a results path: every rank takes part in the
             ///< write, only rank 0 opens the file)
  resolved,  ///< compared as what it resolves to (the module tree, the rows and their plans):
             ///< the same model from files at different paths runs alike
  none,      ///< rank 0 alone reads it (the table's format, the MFU convention)
};

/// Where a run's record carries the option (results/record_schema.cpp, dmuon_compare's key).
struct KeyRole {
  enum Where {
    none,   ///< not in the key: `why` says why (it changes nothing a run measures)
    field,  ///< its own record field `name` (a typed field of the schema, with its key label)
    plan,   ///< a "name=value" fragment of the record's plan_options
    run,    ///< a "name=value" fragment of the record's run_options
  };
  Where where = none;
  std::string name;  ///< record field, or the fragment's label
  /// Fragments: the value a file written before the option existed means. The fragment is
  /// left out while the option has it (so such files keep matching); nullopt: always written.
  std::optional<std::string> older;
  std::string why;  ///< none: the reason
};

/// Outputs that show an option (bit set); the config a run records and the advisor's winner
/// config show every option of the tool that has a value.
enum Shown : unsigned {
  kPlanJson = 1,  ///< dmuon_inspect --json "options"
  kKnob = 2,      ///< a knob dmuon_advise searches
  kNoConfig = 4,  ///< left out of the configs the tools write (output paths, formats, aids)
};

template <class T>
struct Option {
  std::string flag;   ///< "--pack-threshold"
  std::string alias;  ///< "-n", or ""
  std::string help;
  std::string group;  ///< the --help and docs section
  Arity arity = Arity::one;
  bool comma_list = false;  ///< list: "a,b" is two values
  std::string valid;        ///< what a valid value is (errors, --help, docs)
  std::string type_name;    ///< --help's type column
  unsigned tools = 0;
  /// Parses the given texts (one per occurrence; "true" for a switch) and sets the target.
  std::function<void(T&, const std::vector<std::string>&, const std::string& flag)> set;
  /// The canonical texts of the target's value: one for a value, one per item of a list, none
  /// when absent (an unset optional, an empty list), "true"/"false" for a switch.
  std::function<std::vector<std::string>(const T&)> values;
  KeyRole key;
  /// A plan/run fragment's value when it is not the option's text (files written before the
  /// table spell it so: "pack=<5000000").
  std::function<std::string(const T&)> key_text;
  Agree agree = Agree::value;
  unsigned shown = 0;
  /// Whether the value means anything given the others (--topology beside --topology-file,
  /// --tokens beside --seq-len): the configs the tools write leave inactive options out.
  std::function<bool(const T&)> active;
  /// Options this one may not be given beside (config keys, each with why), and options it
  /// needs given beside it: run_option_rules.cpp checks both for every row.
  std::vector<std::pair<std::string, std::string>> excludes, requires_given;

  /// The config key: the flag without its dashes, '-' written '_'.
  std::string key_name() const;
  /// The values joined by ','; "" when absent.
  std::string text(const T& t) const;
  bool for_tool(Tool tool) const { return (tools & tool) != 0; }

  // Builder steps, for the tables.
  Option& in(unsigned tool_set) {
    tools = tool_set;
    return *this;
  }
  Option& named(std::string short_alias) {
    alias = std::move(short_alias);
    return *this;
  }
  Option& field_key(std::string record_field) {
    key = {KeyRole::field, std::move(record_field), std::nullopt, ""};
    return *this;
  }
  Option& plan_key(std::string label, std::optional<std::string> older = std::nullopt) {
    key = {KeyRole::plan, std::move(label), std::move(older), ""};
    return *this;
  }
  Option& run_key(std::string label, std::optional<std::string> older) {
    key = {KeyRole::run, std::move(label), std::move(older), ""};
    return *this;
  }
  Option& not_in_key(std::string why) {
    key = {KeyRole::none, "", std::nullopt, std::move(why)};
    return *this;
  }
  Option& keyed_as(std::function<std::string(const T&)> f) {
    key_text = std::move(f);
    return *this;
  }
  Option& agreed(Agree a) {
    agree = a;
    return *this;
  }
  Option& showing(unsigned s) {
    shown = s;
    return *this;
  }
  Option& when(std::function<bool(const T&)> f) {
    active = std::move(f);
    return *this;
  }
  Option& excluding(std::string key, std::string why) {
    excludes.emplace_back(std::move(key), std::move(why));
    return *this;
  }
  Option& needing(std::string key, std::string why) {
    requires_given.emplace_back(std::move(key), std::move(why));
    return *this;
  }
  bool is_active(const T& t) const { return !active || active(t); }
};

template <class T>
std::string Option<T>::key_name() const {
  std::string k = flag.substr(2);
  for (char& c : k)
    if (c == '-') c = '_';
  return k;
}

template <class T>
std::string Option<T>::text(const T& t) const {
  std::string s;
  for (const auto& v : values(t)) s += (s.empty() ? "" : ",") + v;
  return s;
}

/// Splits "a,b" into its items; an empty item ("a,", ",b", "") is an error naming the flag.
std::vector<std::string> comma_items(const std::string& flag, const std::string& text);

// Row builders. `get` is a generic lambda returning a reference to the target's field:
// [](auto& o) -> auto& { return o.engine.step.prefetch; } (it serves const and non-const).

template <class T, class K, class Get>
Option<T> value(std::string flag, std::string group, std::string help, K kind, Get get) {
  Option<T> o;
  o.flag = std::move(flag);
  o.group = std::move(group);
  o.help = std::move(help);
  o.valid = kind.valid();
  o.type_name = kind.type_name();
  o.set = [kind, get](T& t, const std::vector<std::string>& texts, const std::string& f) {
    get(t) = kind.parse(f, texts.back());
  };
  o.values = [kind, get](const T& t) {
    const std::string s = kind.text(get(t));
    return s.empty() ? std::vector<std::string>{} : std::vector<std::string>{s};
  };
  return o;
}

template <class T, class K, class Get>
Option<T> list(std::string flag, std::string group, std::string help, K kind, Get get,
               bool comma_list) {
  Option<T> o;
  o.flag = std::move(flag);
  o.group = std::move(group);
  o.help = std::move(help);
  o.arity = Arity::list;
  o.comma_list = comma_list;
  o.valid = kind.valid() + (comma_list ? " (repeatable, or a comma list)" : " (repeatable)");
  o.type_name = kind.type_name();
  o.set = [kind, get, comma_list](T& t, const std::vector<std::string>& texts,
                                  const std::string& f) {
    auto& out = get(t);
    out.clear();
    for (const auto& text : texts)
      for (const auto& item : comma_list ? comma_items(f, text) : std::vector<std::string>{text})
        out.push_back(kind.parse(f, item));
  };
  o.values = [kind, get](const T& t) {
    std::vector<std::string> v;
    for (const auto& item : get(t)) v.push_back(kind.text(item));
    return v;
  };
  return o;
}

/// A switch with its own effect (`on` applies it; `is_on` reads whether it is in effect).
template <class T>
Option<T> flag_fn(std::string flag_name, std::string group, std::string help,
                  std::function<void(T&)> on, std::function<bool(const T&)> is_on) {
  Option<T> o;
  o.flag = std::move(flag_name);
  o.group = std::move(group);
  o.help = std::move(help);
  o.arity = Arity::flag;
  o.valid = "a switch (config: true or false)";
  o.set = [on](T& t, const std::vector<std::string>&, const std::string&) { on(t); };
  o.values = [is_on](const T& t) { return std::vector<std::string>{is_on(t) ? "true" : "false"}; };
  return o;
}

/// A switch setting a bool field to true.
template <class T, class Get>
Option<T> flag(std::string flag_name, std::string group, std::string help, Get get) {
  return flag_fn<T>(
      std::move(flag_name), std::move(group), std::move(help), [get](T& t) { get(t) = true; },
      [get](const T& t) { return static_cast<bool>(get(t)); });
}

}  // namespace dmuon::apps::options
