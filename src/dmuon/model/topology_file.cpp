#include "dmuon/model/topology_file.hpp"

#include <fmt/format.h>

#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "dmuon/base/abbreviate.hpp"
#include "dmuon/base/atomic_file.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/base/input_file.hpp"
#include "dmuon/model/geometry_json.hpp"

namespace dmuon::model {
namespace {

using Json = nlohmann::ordered_json;  // keeps "dims" in file order

constexpr const char* kFormat = "dmuon-topology";
constexpr int kVersion = 1;

// "<source>:<line>:<col>" of the character at byte offset `pos` (0-based).
std::string location(std::string_view text, std::string_view source, std::size_t pos) {
  pos = std::min(pos, text.size());
  std::size_t line = 1, line_start = 0;
  for (std::size_t k = 0; k < pos; ++k)
    if (text[k] == '\n') {
      ++line;
      line_start = k + 1;
    }
  return fmt::format("{}:{}:{}", source, line, pos - line_start + 1);
}

// nlohmann's message without its "[json.exception...] parse error at line L, column C: " prefix
// (we print our own location) and on one line.
std::string parse_message(const std::string& what) {
  std::string m = what;
  if (auto p = m.find("] "); p != std::string::npos && m.rfind("[json.exception", 0) == 0)
    m = m.substr(p + 2);
  if (m.rfind("parse error", 0) == 0)
    if (auto p = m.find(": "); p != std::string::npos) m = m.substr(p + 2);
  for (auto& c : m)
    if (c == '\n' || c == '\r') c = ' ';
  return m;
}

// A JSON value as quoted in a message: one line, cut to a readable length.
std::string shown(const Json& v) {
  return abbreviate_value(v.dump(-1, ' ', false, Json::error_handler_t::replace));
}

// Module types are class names (`type(m).__name__`, `--boundary types:A,B` matches them):
// identifier-like ASCII, with '.', ':' and '<>' for qualified and templated names. Anything
// else (a NUL, a line break, a ',' that would split a types: list) is not a type name.
void check_type_name(const std::string& type, const std::string& what,
                     const std::function<void(const std::string&)>& fail) {
  const auto ident_start = [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
  };
  bool ok = !type.empty() && type.size() <= kMaxTypeNameLength && ident_start(type[0]);
  for (std::size_t k = 1; ok && k < type.size(); ++k) {
    const char c = type[k];
    ok = ident_start(c) || (c >= '0' && c <= '9') || c == '.' || c == ':' || c == '<' || c == '>';
  }
  if (!ok)
    fail(fmt::format(
        "{} \"{}\" is not a type name (valid: a letter or '_', then letters, digits, '_', '.', "
        "':', '<', '>'; at most {} characters)",
        what, abbreviate_value(type), kMaxTypeNameLength));
}

class Parser {
 public:
  Parser(std::string_view source) : source_(source) {}

  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw InputError(fmt::format("{}: {}{}{}", source_, where, where.empty() ? "" : ": ", what));
  }

  const std::string& string_field(const Json& obj, const char* key, const std::string& where,
                                  bool required) const {
    static const std::string empty;
    auto it = obj.find(key);
    if (it == obj.end()) {
      if (required) fail(where, fmt::format("missing \"{}\"", key));
      return empty;
    }
    if (!it->is_string())
      fail(where, fmt::format("\"{}\" must be a string, got {}", key, shown(*it)));
    return it->get_ref<const std::string&>();
  }

  void check_keys(const Json& obj, std::initializer_list<const char*> valid,
                  const std::string& where) const {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      bool ok = false;
      for (const char* v : valid) ok = ok || it.key() == v;
      if (!ok) {
        std::string list;
        for (const char* v : valid) list += (list.empty() ? "" : ", ") + std::string(v);
        fail(where, fmt::format("unknown key \"{}\" (valid: {})", it.key(), list));
      }
    }
  }

  // Signed 64-bit integer, or fail naming `what`.
  std::int64_t integer(const Json& v, const std::string& where, const std::string& what,
                       std::int64_t min) const {
    std::int64_t x = 0;
    if (v.is_number_unsigned()) {
      const auto u = v.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        fail(where, fmt::format("{} is {} (too large)", what, shown(v)));
      x = static_cast<std::int64_t>(u);
    } else if (v.is_number_integer()) {
      x = v.get<std::int64_t>();
    } else {
      fail(where, fmt::format("{} is {} (must be an integer >= {})", what, shown(v), min));
    }
    if (x < min) fail(where, fmt::format("{} is {} (must be an integer >= {})", what, x, min));
    return x;
  }

  Topology parse(const Json& root) {
    if (!root.is_object()) fail("", "top level must be a JSON object");
    check_keys(root,
               {"format", "version", "name", "preset", "root_type", "dims", "dedicate",
                "recommended_boundary", "incomplete_boundary", "modules", "parameters", "geometry",
                "comment"},
               "");
    const auto& format = string_field(root, "format", "", true);
    if (format != kFormat)
      fail("", fmt::format("\"format\" is \"{}\" (valid: \"{}\")", format, kFormat));
    auto ver = root.find("version");
    if (ver == root.end()) fail("", "missing \"version\"");
    if (!ver->is_number_integer() || ver->get<std::int64_t>() != kVersion)
      fail("", fmt::format("unsupported \"version\" {} (valid: {})", shown(*ver), kVersion));

    Topology t;
    t.name = string_field(root, "name", "", false);
    if (t.name.empty()) t.name = "custom";
    t.preset = string_field(root, "preset", "", false);
    const auto& root_type = string_field(root, "root_type", "", true);
    if (root_type.empty()) fail("", "\"root_type\" must not be empty");
    check_type_name(root_type, "\"root_type\"", [&](const std::string& m) { fail("", m); });
    t.tree = ModuleTree(root_type);
    t.dedicate_rule = string_field(root, "dedicate", "", false);
    t.recommended_boundary = string_field(root, "recommended_boundary", "", false);
    t.incomplete_boundary = string_field(root, "incomplete_boundary", "", false);

    if (auto d = root.find("dims"); d != root.end()) {
      if (!d->is_object()) fail("dims", "must be an object of integers");
      for (auto it = d->begin(); it != d->end(); ++it)
        t.dims.emplace_back(it.key(), integer(*it, "dims", "\"" + it.key() + "\"",
                                              std::numeric_limits<std::int64_t>::min()));
    }

    auto mods = root.find("modules");
    if (mods == root.end()) fail("", "missing \"modules\"");
    if (!mods->is_array()) fail("modules", "must be an array");
    auto params = root.find("parameters");
    if (params == root.end()) fail("", "missing \"parameters\"");
    if (!params->is_array()) fail("parameters", "must be an array");

    parse_modules(*mods, t.tree);
    parse_parameters(*params, t.tree);
    try {
      t.tree.finalize();
    } catch (const InputError& e) {
      fail("", e.what());  // the model's total size overflows 64 bits
    }
    if (auto g = root.find("geometry"); g != root.end()) {
      t.geometry = parse_geometry_json(*g, source_);
      validate_geometry(*t.geometry, t.tree, source_);
      mark_routed_experts(*t.geometry, t.tree);
    }
    return t;
  }

 private:
  void parse_modules(const Json& mods, ModuleTree& tree) {
    module_by_path_.reserve(mods.size() + 1);
    module_by_path_.emplace("", Slot{ModuleTree::root, -1});
    for (std::size_t k = 0; k < mods.size(); ++k) {
      const Json& m = mods[k];
      std::string where = fmt::format("modules[{}]", k);
      if (!m.is_object()) fail(where, "must be an object {\"path\": ..., \"type\": ...}");
      const auto& path = string_field(m, "path", where, true);
      where += fmt::format(" '{}'", abbreviate_value(path));
      check_keys(m, {"path", "type"}, where);
      const auto& type = string_field(m, "type", where, true);
      if (path.empty()) fail(where, "empty path (the root is given by \"root_type\")");
      if (type.empty()) fail(where, "empty \"type\"");
      check_type_name(type, "\"type\"", [&](const std::string& m) { fail(where, m); });
      if (path.front() == '.' || path.back() == '.' || path.find("..") != std::string::npos)
        fail(where, "empty path segment");
      const auto dot = path.rfind('.');
      const std::string parent = dot == std::string::npos ? std::string() : path.substr(0, dot);
      auto pit = module_by_path_.find(parent);
      if (pit == module_by_path_.end())
        fail(where,
             fmt::format("parent '{}' is not defined before it (list parents first)", parent));
      if (auto dup = module_by_path_.find(path); dup != module_by_path_.end())
        fail(where, fmt::format("duplicate path (first at modules[{}])", dup->second.entry));
      const int id = tree.add_module(pit->second.module, path.substr(dot + 1), type);
      module_by_path_.emplace(path, Slot{id, static_cast<int>(k)});
    }
  }

  // Resolves a parameter name "<module path>.<attr>" to its holder module; fails with `where`.
  std::pair<int, std::string> holder(const std::string& name, const std::string& where,
                                     const std::string& what) const {
    if (name.empty() || name.front() == '.' || name.back() == '.' ||
        name.find("..") != std::string::npos)
      fail(where, fmt::format("{} '{}' has an empty path segment", what, name));
    if (module_by_path_.count(name))
      fail(where, fmt::format("{} '{}' is a module, not a parameter", what, name));
    const auto dot = name.rfind('.');
    const std::string mod = dot == std::string::npos ? std::string() : name.substr(0, dot);
    auto it = module_by_path_.find(mod);
    if (it == module_by_path_.end())
      fail(where,
           fmt::format("{} '{}': holder module '{}' is not in \"modules\"", what, name, mod));
    return {it->second.module, name.substr(dot + 1)};
  }

  void claim(const std::string& name, std::size_t entry, const std::string& where,
             const std::string& what) {
    auto [it, fresh] = param_entry_.emplace(name, static_cast<int>(entry));
    if (!fresh)
      fail(where,
           fmt::format("{} '{}' is already a name of parameters[{}]", what, name, it->second));
  }

  void parse_parameters(const Json& params, ModuleTree& tree) {
    param_entry_.reserve(params.size());
    for (std::size_t k = 0; k < params.size(); ++k) {
      const Json& p = params[k];
      std::string where = fmt::format("parameters[{}]", k);
      if (!p.is_object())
        fail(where, "must be an object {\"name\": ..., \"shape\": [...], \"dtype\": ...}");
      const auto& name = string_field(p, "name", where, true);
      where += fmt::format(" '{}'", abbreviate_value(name));
      check_keys(p, {"name", "shape", "dtype", "tied"}, where);
      auto [module, attr] = holder(name, where, "name");
      claim(name, k, where, "name");

      auto sh = p.find("shape");
      if (sh == p.end()) fail(where, "missing \"shape\"");
      if (!sh->is_array())
        fail(where, fmt::format("\"shape\" must be an array, got {}", shown(*sh)));
      std::vector<std::int64_t> shape;
      shape.reserve(sh->size());
      std::int64_t numel = 1;
      for (std::size_t j = 0; j < sh->size(); ++j) {
        const auto d = integer((*sh)[j], where, fmt::format("shape[{}]", j), 0);
        if (__builtin_mul_overflow(numel, d, &numel))
          fail(where, fmt::format("shape {} has more than 2^63 elements", shown(*sh)));
        shape.push_back(d);
      }
      DType dtype = DType::f32;
      const auto& dt = string_field(p, "dtype", where, false);
      if (p.contains("dtype")) {
        try {
          dtype = parse_dtype(dt);
        } catch (const InputError& e) {
          fail(where, e.what());
        }
      }
      int id = -1;
      try {
        id = tree.add_parameter(module, attr, std::move(shape), dtype);
      } catch (const InputError& e) {
        fail(where, e.what());  // e.g. its element count times 4 bytes overflows 64 bits
      }

      if (auto ti = p.find("tied"); ti != p.end()) {
        if (!ti->is_array())
          fail(where, fmt::format("\"tied\" must be an array of names, got {}", shown(*ti)));
        for (std::size_t j = 0; j < ti->size(); ++j) {
          const std::string what = fmt::format("tied[{}]", j);
          if (!(*ti)[j].is_string())
            fail(where, fmt::format("{} is {} (must be a parameter name)", what, shown((*ti)[j])));
          const auto& alias = (*ti)[j].get_ref<const std::string&>();
          auto [m, a] = holder(alias, where, what);
          claim(alias, k, where, what);
          tree.tie_parameter(m, a, id);
        }
      }
    }
  }

  struct Slot {
    int module;
    int entry;  // index in "modules", -1 for the root
  };
  std::string source_;
  std::unordered_map<std::string, Slot> module_by_path_;
  std::unordered_map<std::string, int> param_entry_;
};

std::string quoted(const std::string& s) {
  return Json(s).dump(-1, ' ', false, Json::error_handler_t::replace);
}

// Refuses nesting deeper than kMaxTopologyJsonDepth before nlohmann builds (and recursively
// destroys) the document: a 100,000-level array must be an error, not a stack overflow.
void check_depth(std::string_view text, std::string_view source) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t k = 0; k < text.size(); ++k) {
    const char c = text[k];
    if (in_string) {
      if (c == '\\')
        ++k;  // the escaped character cannot end the string
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxTopologyJsonDepth)
        throw InputError(
            fmt::format("{}: JSON nested deeper than {} levels (a topology file "
                        "needs 4)",
                        location(text, source, k), kMaxTopologyJsonDepth));
    } else if (c == ']' || c == '}') {
      --depth;  // unbalanced input is the parser's to report
    }
  }
}

}  // namespace

Topology parse_topology_json(std::string_view text, std::string_view source_name) {
  check_depth(text, source_name);
  Json root;
  try {
    root = Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    // e.byte counts the characters read, the offending one included.
    const std::size_t pos = e.byte > 0 ? e.byte - 1 : 0;
    throw InputError(
        fmt::format("{}: {}", location(text, source_name, pos), parse_message(e.what())));
  } catch (const Json::out_of_range& e) {
    // A number past a double's range ("1e400"): nlohmann names the literal, not its place.
    const std::string m = parse_message(e.what());
    const auto q = m.find('\'');
    const std::string literal =
        q == std::string::npos ? std::string() : m.substr(q + 1, m.find('\'', q + 1) - q - 1);
    const auto at = literal.empty() ? std::string_view::npos : text.find(literal);
    throw InputError(fmt::format(
        "{}: number {} is out of range (valid: JSON numbers within a 64-bit float's range; "
        "sizes and dims are integers within 64 bits)",
        at == std::string_view::npos ? std::string(source_name) : location(text, source_name, at),
        abbreviate_value(literal)));
  } catch (const Json::exception& e) {
    throw InputError(fmt::format("{}: {} (valid: a JSON topology file, docs/TOPOLOGY-FILE.md)",
                                 source_name, abbreviate_value(parse_message(e.what()), 200)));
  }
  try {
    return Parser(source_name).parse(root);
  } catch (const Json::exception& e) {
    // A type mismatch the checks above did not foresee: still one line naming the file.
    throw InputError(fmt::format("{}: {} (valid: docs/TOPOLOGY-FILE.md)", source_name,
                                 abbreviate_value(parse_message(e.what()), 200)));
  }
}

Topology read_topology_file(const std::string& path) {
  if (path.empty()) throw InputError("topology file name is empty");
  return parse_topology_json(read_regular_file(path, "topology file", kMaxTopologyFileBytes), path);
}

std::string write_topology_json(const Topology& t) {
  const ModuleTree& tree = t.tree;
  if (!tree.finalized()) throw std::logic_error("write_topology_json: tree not finalized");
  std::string out;
  out.reserve(128 + 64 * tree.num_modules() + 96 * tree.num_parameters());
  out += fmt::format("{{\n  \"format\": \"{}\",\n  \"version\": {},\n  \"name\": {},\n", kFormat,
                     kVersion, quoted(t.name));
  if (!t.preset.empty()) out += fmt::format("  \"preset\": {},\n", quoted(t.preset));
  out += fmt::format("  \"root_type\": {},\n", quoted(tree.module(ModuleTree::root).type));
  if (!t.dims.empty()) {
    out += "  \"dims\": {";
    for (std::size_t k = 0; k < t.dims.size(); ++k)
      out += fmt::format("{}{}: {}", k ? ", " : "", quoted(t.dims[k].first), t.dims[k].second);
    out += "},\n";
  }
  if (!t.dedicate_rule.empty())
    out += fmt::format("  \"dedicate\": {},\n", quoted(t.dedicate_rule));
  if (!t.recommended_boundary.empty())
    out += fmt::format("  \"recommended_boundary\": {},\n", quoted(t.recommended_boundary));
  if (!t.incomplete_boundary.empty())
    out += fmt::format("  \"incomplete_boundary\": {},\n", quoted(t.incomplete_boundary));
  if (t.geometry) out += fmt::format("  \"geometry\": {},\n", write_geometry_json(*t.geometry));

  out += "  \"modules\": [";
  bool first = true;
  for (int m : tree.preorder()) {
    if (m == ModuleTree::root) continue;
    const Module& mod = tree.module(m);
    out += fmt::format("{}\n    {{\"path\": {}, \"type\": {}}}", first ? "" : ",", quoted(mod.path),
                       quoted(mod.type));
    first = false;
  }
  out += first ? "],\n" : "\n  ],\n";

  out += "  \"parameters\": [";
  first = true;
  for (int id : tree.parameter_order()) {
    const Parameter& p = tree.parameter(id);
    out +=
        fmt::format("{}\n    {{\"name\": {}, \"shape\": [{}], \"dtype\": \"{}\"", first ? "" : ",",
                    quoted(p.name), fmt::join(p.shape, ", "), dtype_name(p.dtype));
    if (p.aliased()) {
      out += ", \"tied\": [";
      for (std::size_t k = 1; k < p.holders.size(); ++k)
        out += (k > 1 ? ", " : "") + quoted(tree.holder_name(p.holders[k]));
      out += "]";
    }
    out += "}";
    first = false;
  }
  out += first ? "]\n}\n" : "\n  ]\n}\n";
  return out;
}

void write_topology_file(const Topology& t, const std::string& path) {
  write_file_atomically(path, write_topology_json(t), "topology file");
}

}  // namespace dmuon::model
