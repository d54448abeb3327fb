#include "options/run_option_outputs.hpp"

#include <fmt/format.h>

#include <cstdlib>

namespace dmuon::apps::options {
namespace {

config::KeyKind key_kind(Arity a) {
  switch (a) {
    case Arity::flag: return config::KeyKind::flag;
    case Arity::one: return config::KeyKind::scalar;
    case Arity::list: return config::KeyKind::list;
  }
  return config::KeyKind::scalar;
}

bool plain_safe(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' ||
          c == '/' || c == '+'))
      return false;
  return s[0] != '-' || s.size() == 1 || std::isdigit(static_cast<unsigned char>(s[1]));
}

nlohmann::json typed(const RunOption& option, const std::string& text) {
  if (option.arity == Arity::flag) return text == "true";
  if (option.type_name == "INTEGER" && text.find_first_not_of("-0123456789") == std::string::npos &&
      !text.empty())
    return std::strtoll(text.c_str(), nullptr, 10);
  if (option.type_name == "NUMBER") return std::strtod(text.c_str(), nullptr);
  return text;
}

std::string tools_text(unsigned tools) {
  std::string s;
  for (Tool t : {kInspect, kBench, kProject, kAdvise})
    if (tools & t) s += (s.empty() ? "" : ", ") + std::string(tool_name(t));
  return s;
}

std::string key_text(const KeyRole& k) {
  switch (k.where) {
    case KeyRole::none: return "not keyed: " + k.why;
    case KeyRole::field: return "record field `" + k.name + "`";
    case KeyRole::plan:
    case KeyRole::run: {
      std::string s = fmt::format("`{}={}` in {}_options", k.name, "...",
                                  k.where == KeyRole::plan ? "plan" : "run");
      if (k.older)
        s += k.older->empty() ? std::string(" (left out when unset)")
                              : fmt::format(" (left out at `{}`)", *k.older);
      return s;
    }
  }
  return "";
}

// A markdown table cell: '|' would end it.
std::string table_cell(const std::string& text) {
  std::string s;
  for (char c : text) s += c == '|' ? std::string("\\|") : std::string(1, c);
  return s;
}

std::string agree_text(Agree a) {
  switch (a) {
    case Agree::value: return "value";
    case Agree::presence: return "given or not";
    case Agree::resolved: return "as resolved (model, rows)";
    case Agree::none: return "rank 0 only";
  }
  return "";
}

}  // namespace

std::string yaml_scalar(const std::string& s) {
  return plain_safe(s) ? s : nlohmann::json(s).dump();
}

std::vector<config::ConfigKey> config_keys(Tool tool) {
  std::vector<config::ConfigKey> keys;
  for (const auto& o : run_option_table())
    if (o.for_tool(tool)) keys.push_back({o.key_name(), key_kind(o.arity), o.help});
  return keys;
}

void describe_options(const RunOptions& o, Tool tool, RunDescription& d) {
  for (const auto& option : run_option_table()) {
    if (!option.for_tool(tool) || option.agree == Agree::none || option.agree == Agree::resolved)
      continue;
    const std::string text = option.text(o);
    if (option.agree == Agree::presence)
      d.add(option.key_name(), text.empty() ? "none" : "given");
    else
      d.add(option.key_name(), text.empty() ? "(default)" : text);
  }
}

std::string config_yaml(const RunOptions& o, unsigned tools, const std::string& header) {
  std::string s = header;
  for (const auto& option : run_option_table()) {
    if ((option.tools & tools) != tools || (option.shown & kNoConfig) || !option.is_active(o))
      continue;
    const auto values = option.values(o);
    // An absent value, or a switch that is off: the default, said by leaving the key out.
    if (values.empty() || (option.arity == Arity::flag && values.front() == "false")) continue;
    if (option.arity != Arity::list) {
      s += fmt::format("{}: {}\n", option.key_name(), yaml_scalar(values.front()));
      continue;
    }
    std::string items;
    for (const auto& v : values) items += (items.empty() ? "" : ", ") + yaml_scalar(v);
    s += fmt::format("{}: [{}]\n", option.key_name(), items);
  }
  return s;
}

std::string projection_only_flags(const RunOptions& o) {
  const RunOptions defaults;
  std::string s;
  for (const auto& option : run_option_table()) {
    if (!option.for_tool(kProject) || option.for_tool(kBench) || (option.shown & kNoConfig) ||
        option.flag == "--machine" || option.flag == "--world-size" || !option.is_active(o))
      continue;
    const auto values = option.values(o);
    if (values.empty() || values == option.values(defaults)) continue;
    for (const auto& v : values) s += fmt::format(" {} {}", option.flag, v);
  }
  return s;
}

std::string key_fragments(const RunOptions& o, KeyRole::Where where) {
  std::string s;
  for (const auto& option : run_option_table()) {
    if (option.key.where != where) continue;
    const std::string text = option.key_text ? option.key_text(o) : option.text(o);
    if (option.key.older && text == *option.key.older) continue;
    s += fmt::format("{}{}={}", s.empty() ? "" : " ", option.key.name, text);
  }
  return s;
}

nlohmann::json options_json(const RunOptions& o, Tool tool, unsigned shown) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& option : run_option_table()) {
    if (!option.for_tool(tool) || !(option.shown & shown)) continue;
    const auto values = option.values(o);
    if (option.arity == Arity::list) {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& v : values) a.push_back(typed(option, v));
      j[option.key_name()] = a;
    } else {
      j[option.key_name()] = values.empty() ? nlohmann::json() : typed(option, values.front());
    }
  }
  return j;
}

std::string options_markdown() {
  std::string s =
      "# Options\n\n"
      "Generated from the option table (`src/apps/options/run_option_table.cpp`) by\n"
      "`dmuon_inspect --options-markdown`; `option_table_test` fails when this file is\n"
      "stale. A config file's keys are the flags without their dashes, `-` written `_`;\n"
      "a switch is `key: true`, a list a YAML sequence (`--config`: configs/README.md).\n"
      "\"Run key\" says how dmuon_compare tells apart two runs that differ in the option:\n"
      "its own record field, a fragment of the record's `plan_options` or `run_options`\n"
      "(left out at the value a file written before the option existed means, so such files\n"
      "keep matching), or why it is not keyed. \"Agree\" is what dmuon_bench's ranks compare "
      "before the first collective.\n";
  const RunOptions defaults;
  std::string group;
  for (const auto& o : run_option_table()) {
    if (o.group != group) {
      group = o.group;
      s += fmt::format(
          "\n## {}\n\n| flag | valid | default | tools | run key | agree |\n"
          "| --- | --- | --- | --- | --- | --- |\n",
          group);
    }
    const std::string def = o.arity == Arity::flag ? "off" : o.text(defaults);
    s += fmt::format("| `{}`{} | {} | {} | {} | {} | {} |\n", o.flag,
                     o.alias.empty() ? "" : fmt::format(" (`{}`)", o.alias), table_cell(o.valid),
                     def.empty() ? "-" : "`" + def + "`", tools_text(o.tools), key_text(o.key),
                     agree_text(o.agree));
  }
  s += "\nPer option, the help text: `TOOL --help`.\n";
  return s;
}

}  // namespace dmuon::apps::options
