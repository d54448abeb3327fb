// Topology file: round trip of every built-in preset, the committed example and Python golden
// file, and the location in every error message (line:col for syntax, entry for semantics).
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "dmuon/base/error.hpp"
#include "dmuon/model/topology_file.hpp"

#ifndef DMUON_SOURCE_DIR
#error "DMUON_SOURCE_DIR must point at the repository root"
#endif

namespace dmuon::model {
namespace {

namespace fs = std::filesystem;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Everything a consumer can observe, in a comparable form.
struct Snapshot {
  std::vector<std::string> modules;        // "path:type" in pre-order
  std::vector<std::string> params;         // "name shape dtype holders" in parameter order
  std::vector<std::string> module_params;  // per module, holder names of its params in order
  bool operator==(const Snapshot& o) const {
    return modules == o.modules && params == o.params && module_params == o.module_params;
  }
};

Snapshot snapshot(const ModuleTree& t) {
  Snapshot s;
  for (int m : t.preorder()) {
    const auto& mod = t.module(m);
    s.modules.push_back(mod.path + ":" + mod.type);
    std::string held = mod.path + ":";
    for (int p : mod.params) {
      for (const auto& h : t.parameter(p).holders)
        if (h.module == m) held += " " + h.attr + "->" + t.parameter(p).name;
    }
    s.module_params.push_back(held);
  }
  for (int id : t.parameter_order()) {
    const auto& p = t.parameter(id);
    std::string line = p.name + " [";
    for (auto d : p.shape) line += std::to_string(d) + ",";
    line += std::string("] ") + dtype_name(p.dtype);
    for (const auto& h : p.holders) line += " " + t.holder_name(h);
    s.params.push_back(line);
  }
  return s;
}

void expect_same(const Topology& a, const Topology& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.preset, b.preset);
  EXPECT_EQ(a.dims, b.dims);
  EXPECT_EQ(a.dedicate_rule, b.dedicate_rule);
  EXPECT_EQ(a.recommended_boundary, b.recommended_boundary);
  EXPECT_EQ(a.incomplete_boundary, b.incomplete_boundary);
  EXPECT_EQ(a.tree.num_modules(), b.tree.num_modules());
  EXPECT_EQ(a.tree.num_parameters(), b.tree.num_parameters());
  EXPECT_TRUE(snapshot(a.tree) == snapshot(b.tree)) << a.name << "/" << a.preset;
}

template <class F>
std::string input_error(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    return msg;
  }
  ADD_FAILURE() << "no InputError thrown";
  return {};
}

std::string parse_error(const std::string& text) {
  return input_error([&] { parse_topology_json(text, "t.json"); });
}

void expect_contains(const std::string& msg, const std::vector<std::string>& needles) {
  for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << msg << " / " << n;
}

TEST(TopologyFile, EveryBuiltinPresetRoundTrips) {
  for (const auto& info : builtin_topologies())
    for (const auto& preset : info.presets) {
      const auto t = build_topology(info.name, preset);
      const std::string text = write_topology_json(t);
      const auto back = parse_topology_json(text, "mem");
      expect_same(t, back);
      EXPECT_EQ(write_topology_json(back), text) << info.name << "/" << preset;  // idempotent
    }
  for (const auto& ovr :
       std::vector<std::pair<std::string, std::string>>{{"tie_embeddings", "1"}, {"layers", "1"}}) {
    const auto t = build_topology("llm", "tiny", {ovr});
    expect_same(t, parse_topology_json(write_topology_json(t), "mem"));
  }
}

TEST(TopologyFile, TiedParameterSerialization) {
  const auto t = build_topology("llm", "tiny", {{"tie_embeddings", "1"}});
  const std::string text = write_topology_json(t);
  EXPECT_NE(text.find("{\"name\": \"model.embed_tokens.weight\", \"shape\": [1000, 128], "
                      "\"dtype\": \"float32\", \"tied\": [\"lm_head.weight\"]}"),
            std::string::npos);
  EXPECT_EQ(text.find("{\"name\": \"lm_head.weight\""), std::string::npos);
  const auto back = parse_topology_json(text, "mem");
  const auto id = back.tree.find_parameter("model.embed_tokens.weight");
  ASSERT_TRUE(id);
  ASSERT_EQ(back.tree.parameter(*id).holders.size(), 2u);
  EXPECT_EQ(back.tree.holder_name(back.tree.parameter(*id).holders[1]), "lm_head.weight");
}

TEST(TopologyFile, FileWriteReadAndErrors) {
  const fs::path dir = fs::temp_directory_path() / ("dmuon_topo_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "moe.json").string();
  const auto t = build_topology("moe");
  write_topology_file(t, path);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  expect_same(t, read_topology_file(path));
  write_topology_file(build_topology("vla"), path);  // overwrite in place
  EXPECT_EQ(read_topology_file(path).name, "vla");

  const std::string missing = (dir / "nope.json").string();
  expect_contains(input_error([&] { read_topology_file(missing); }), {missing, "cannot read"});
  expect_contains(input_error([&] { read_topology_file(dir.string()); }), {"directory"});
  const std::string bad_dir = (dir / "no" / "such" / "x.json").string();
  expect_contains(input_error([&] { write_topology_file(t, bad_dir); }), {bad_dir, "cannot write"});
  // File errors carry the path as location.
  std::ofstream(dir / "bad.json") << "{\n  \"format\": \"dmuon-topology\",\n  \"version\": @\n}\n";
  const std::string bad = (dir / "bad.json").string();
  EXPECT_EQ(input_error([&] { read_topology_file(bad); }).rfind(bad + ":3:14: ", 0), 0u);
  fs::remove_all(dir);
}

TEST(TopologyFile, CommittedExampleMatchesWriter) {
  const std::string path =
      std::string(DMUON_SOURCE_DIR) + "/configs/topologies/example_tiny_vla.json";
  const auto file = read_topology_file(path);
  const auto built = build_topology("vla", "tiny");
  expect_same(built, file);
  EXPECT_EQ(slurp(path), write_topology_json(built)) << "regenerate " << path;
}

// Written by scripts/export_topology.py from a fake module (tests/unit/model/
// test_export_topology.py checks the exporter still produces exactly this file).
TEST(TopologyFile, PythonExporterGolden) {
  const auto t =
      read_topology_file(std::string(DMUON_SOURCE_DIR) + "/tests/unit/model/data/fake_export.json");
  EXPECT_EQ(t.name, "fake");
  EXPECT_EQ(t.preset, "");
  EXPECT_TRUE(t.dims.empty());
  EXPECT_EQ(t.tree.module(ModuleTree::root).type, "TinyLM");
  EXPECT_EQ(t.tree.num_modules(), 8u);  // root + 7
  EXPECT_EQ(t.tree.num_parameters(), 4u);
  const auto id = t.tree.find_parameter("embed.weight");
  ASSERT_TRUE(id);
  const auto& p = t.tree.parameter(*id);
  EXPECT_EQ(p.shape, (std::vector<std::int64_t>{100, 16}));
  EXPECT_EQ(p.dtype, DType::bf16);
  ASSERT_EQ(p.holders.size(), 2u);
  EXPECT_EQ(t.tree.holder_name(p.holders[1]), "head.weight");
  EXPECT_EQ(t.tree.parameter(*t.tree.find_parameter("layers.0.proj.weight")).shape,
            (std::vector<std::int64_t>{16, 16}));
  EXPECT_EQ(t.tree.parameter(*t.tree.find_parameter("scale")).shape, std::vector<std::int64_t>{});
  EXPECT_EQ(t.tree.module(*t.tree.find_module("layers.1")).type, "Block");
  // The C++ writer emits the same bytes for the same tree: one format, two writers.
  EXPECT_EQ(write_topology_json(t),
            slurp(std::string(DMUON_SOURCE_DIR) + "/tests/unit/model/data/fake_export.json"));
}

TEST(TopologyFile, MinimalDocument) {
  const auto t = parse_topology_json(
      R"({"format": "dmuon-topology", "version": 1, "root_type": "Net", "modules": [],
          "parameters": [{"name": "w", "shape": [3, 4]}]})",
      "m");
  EXPECT_EQ(t.name, "custom");
  EXPECT_EQ(t.tree.num_modules(), 1u);
  EXPECT_EQ(t.tree.parameter(0).name, "w");
  EXPECT_EQ(t.tree.parameter(0).dtype, DType::f32);
  EXPECT_TRUE(t.dedicate_rule.empty());
}

TEST(TopologyFile, SyntaxErrorsCarryLineAndColumn) {
  // '@' is line 3, column 14.
  EXPECT_EQ(parse_error("{\n  \"format\": \"dmuon-topology\",\n  \"version\": @\n}")
                .rfind("t.json:3:14: ", 0),
            0u);
  // Missing comma: reported at the end of the unexpected string token (line 2, column 23).
  EXPECT_EQ(parse_error("{\"modules\": [\n    {\"path\": \"a\" \"type\": \"X\"}]}")
                .rfind("t.json:2:23: ", 0),
            0u);
  // Truncated input: at the end.
  const std::string trunc = parse_error("{\n  \"a\": [1,\n");
  EXPECT_EQ(trunc.rfind("t.json:3:1: ", 0), 0u) << trunc;
  EXPECT_EQ(parse_error("").rfind("t.json:1:1: ", 0), 0u);
  // nlohmann's own "[json.exception...]" prefix is not repeated.
  EXPECT_EQ(parse_error("[").find("json.exception"), std::string::npos);
}

// A valid header around custom modules/parameters arrays.
std::string doc(const std::string& modules, const std::string& params) {
  return R"({"format": "dmuon-topology", "version": 1, "name": "x", "root_type": "R",
    "modules": )" +
         modules + R"(, "parameters": )" + params + "}";
}

TEST(TopologyFile, SemanticErrorsNameTheEntry) {
  const std::string mods = R"([{"path": "a", "type": "A"}, {"path": "a.b", "type": "B"}])";
  expect_contains(parse_error(doc(R"([{"path": "a.b", "type": "B"}])", "[]")),
                  {"t.json: modules[0] 'a.b'", "parent 'a'"});
  expect_contains(
      parse_error(doc(R"([{"path": "a", "type": "A"}, {"path": "a", "type": "A"}])", "[]")),
      {"modules[1] 'a'", "duplicate", "modules[0]"});
  expect_contains(parse_error(doc(R"([{"path": "a..b", "type": "A"}])", "[]")),
                  {"modules[0] 'a..b'", "empty path segment"});
  expect_contains(parse_error(doc(R"([{"path": "", "type": "A"}])", "[]")),
                  {"modules[0] ''", "root_type"});
  expect_contains(parse_error(doc(R"([{"path": "a"}])", "[]")), {"modules[0] 'a'", "\"type\""});
  expect_contains(parse_error(doc(R"([{"path": "a", "type": "A", "kind": 1}])", "[]")),
                  {"modules[0]", "unknown key \"kind\"", "path, type"});
  expect_contains(parse_error(doc("[3]", "[]")), {"modules[0]", "object"});
  expect_contains(parse_error(doc(mods, R"([{"name": "a.b.w", "shape": [-1]}])")),
                  {"parameters[0] 'a.b.w'", "shape[0] is -1"});
  expect_contains(parse_error(doc(mods, R"([{"name": "a.b.w", "shape": [2.5]}])")),
                  {"parameters[0] 'a.b.w'", "shape[0] is 2.5"});
  expect_contains(parse_error(doc(mods, R"([{"name": "a.b.w", "shape": "2x3"}])")),
                  {"parameters[0] 'a.b.w'", "\"shape\" must be an array"});
  expect_contains(parse_error(doc(mods, R"([{"name": "a.b.w"}])")),
                  {"parameters[0] 'a.b.w'", "missing \"shape\""});
  expect_contains(
      parse_error(doc(mods, R"([{"name": "a.b.w", "shape": [4294967296, 4294967296]}])")),
      {"parameters[0] 'a.b.w'", "2^63"});
  expect_contains(parse_error(doc(mods, R"([{"name": "a.w", "shape": [1]},
                                           {"name": "a.b.w", "shape": [2], "dtype": "float8"}])")),
                  {"parameters[1] 'a.b.w'", "'float8'", "float32, bfloat16, float16"});
  expect_contains(parse_error(doc(mods, R"([{"name": "z.w", "shape": [1]}])")),
                  {"parameters[0] 'z.w'", "holder module 'z'"});
  expect_contains(parse_error(doc(mods, R"([{"name": "a.b", "shape": [1]}])")),
                  {"parameters[0] 'a.b'", "is a module, not a parameter"});
  expect_contains(
      parse_error(doc(mods, R"([{"name": "a.w", "shape": [1]}, {"name": "a.w", "shape": [1]}])")),
      {"parameters[1] 'a.w'", "already a name of parameters[0]"});
  expect_contains(
      parse_error(doc(mods, R"([{"name": "a.w", "shape": [1], "tied": ["zz.weight"]}])")),
      {"parameters[0] 'a.w'", "tied[0] 'zz.weight'", "holder module 'zz'"});
  expect_contains(
      parse_error(doc(
          mods,
          R"([{"name": "a.w", "shape": [1]}, {"name": "a.b.w", "shape": [1], "tied": ["a.b.v", "a.w"]}])")),
      {"parameters[1] 'a.b.w'", "tied[1] 'a.w'", "already a name of parameters[0]"});
  expect_contains(parse_error(doc(mods, R"([{"name": "a.w", "shape": [1], "tied": ["a.b"]}])")),
                  {"tied[0] 'a.b'", "is a module, not a parameter"});
  expect_contains(parse_error(doc(mods, R"([{"name": "a.w", "shape": [1], "tied": [7]}])")),
                  {"tied[0] is 7"});
  expect_contains(parse_error(doc(mods, R"([{"name": "a.w", "shape": [1], "shpae": [1]}])")),
                  {"parameters[0] 'a.w'", "unknown key \"shpae\""});
  // Header errors.
  expect_contains(parse_error("[]"), {"t.json: ", "object"});
  expect_contains(parse_error(R"({"format": "onnx", "version": 1})"),
                  {"\"onnx\"", "dmuon-topology"});
  expect_contains(parse_error(R"({"format": "dmuon-topology", "version": 2})"),
                  {"version\" 2", "valid: 1"});
  expect_contains(parse_error(R"({"format": "dmuon-topology", "version": 1, "modules": []})"),
                  {"missing \"root_type\""});
  expect_contains(
      parse_error(
          R"({"format": "dmuon-topology", "version": 1, "root_type": "R", "parameters": []})"),
      {"missing \"modules\""});
  expect_contains(parse_error(R"({"format": "dmuon-topology", "version": 1, "nmae": "x"})"),
                  {"unknown key \"nmae\""});
  expect_contains(parse_error(R"({"format": "dmuon-topology", "version": 1, "root_type": "R",
                                  "dims": {"d": "wide"}, "modules": [], "parameters": []})"),
                  {"dims", "\"d\" is \"wide\""});
}

TEST(TopologyFile, SizesAreChecked) {
  const std::string mods = R"([{"path": "a", "type": "A"}, {"path": "a.b", "type": "B"}])";
  // 2^31 x 2^31 = 2^62 elements fit in int64, their 4-byte size does not.
  expect_contains(
      parse_error(doc(mods, R"([{"name": "a.b.w", "shape": [2147483648, 2147483648]}])")),
      {"t.json: parameters[0] 'a.b.w'", "parameter 'a.b.w'", "overflows 64 bits"});
  // Two 2^60-element parameters: the model's total overflows at the second.
  expect_contains(parse_error(doc(mods, R"([{"name": "a.w", "shape": [1073741824, 1073741824]},
                                           {"name": "a.b.w", "shape": [1073741824, 1073741824]}])")),
                  {"t.json: ", "at parameter 'a.b.w'"});
}

// Hostile documents (issue 24): one line naming the file, the place and what is valid; never
// nlohmann's own text.
TEST(TopologyFile, HostileValuesAreOneLineErrors) {
  const std::string mods = R"([{"path": "a", "type": "A"}])";
  const std::string v400 =
      parse_error("{\"format\": \"dmuon-topology\",\n  \"version\": 1e400, \"root_type\": \"R\"}");
  expect_contains(v400, {"t.json:2:14: number 1e400 is out of range (valid: "});
  EXPECT_EQ(v400.find("json.exception"), std::string::npos) << v400;
  expect_contains(parse_error(doc(mods, R"([{"name": "a.w", "shape": [1e400]}])")),
                  {"t.json:", "number 1e400 is out of range"});
  // Type names: identifier-like, control characters escaped in the message.
  const std::string nul = parse_error(
      R"({"format": "dmuon-topology", "version": 1, "root_type": "R\u0000X", "modules": [],
          "parameters": []})");
  expect_contains(nul, {"t.json: \"root_type\" \"R\\x00X\" is not a type name (valid: a letter"});
  EXPECT_EQ(nul.find('\0'), std::string::npos);
  expect_contains(parse_error(doc(R"([{"path": "a", "type": "A\nB"}])", "[]")),
                  {"modules[0] 'a': \"type\" \"A\\nB\" is not a type name"});
  expect_contains(parse_error(doc(R"([{"path": "a", "type": "A,B"}])", "[]")),
                  {"\"A,B\" is not a type name"});
  expect_contains(parse_error(doc(R"([{"path": "a", "type": "9A"}])", "[]")),
                  {"\"9A\" is not a type name"});
  expect_contains(
      parse_error(doc(R"([{"path": "a", "type": ")" + std::string(300, 'A') + R"("}])", "[]")),
      {"(300 characters)\" is not a type name", "at most 256 characters"});
  // Qualified and templated class names are type names; so is a control character in a path
  // (any UTF-8 is a path), escaped when a message quotes it.
  EXPECT_NO_THROW((void)parse_topology_json(
      doc(R"([{"path": "a", "type": "torch.nn.Linear"}, {"path": "b", "type": "Wrap<Block>"},
              {"path": "c", "type": "ns::Mlp_2"}])",
          "[]"),
      "t.json"));
  expect_contains(
      parse_error(doc(R"([{"path": "a\tb", "type": "A"}, {"path": "a\tb", "type": "A"}])", "[]")),
      {"modules[1] 'a\\tb'", "duplicate"});
}

// An attribute alias (the same object twice under one module) round-trips as "tied" and is
// not tied: one parent.
TEST(TopologyFile, AliasInOneModule) {
  const auto t =
      parse_topology_json(doc(R"([{"path": "a", "type": "Linear"}])",
                              R"([{"name": "a.weight", "shape": [4, 4], "tied": ["a.alias"]}])"),
                          "t.json");
  const auto& p = t.tree.parameter(0);
  EXPECT_FALSE(p.tied());
  EXPECT_TRUE(p.aliased());
  EXPECT_NE(write_topology_json(t).find(R"("tied": ["a.alias"])"), std::string::npos);
}

TEST(TopologyFile, NestingDepthIsBounded) {
  // 100,000 levels: refused at the 65th '[' (line 1, column 65), before the document is built.
  expect_contains(parse_error(std::string(100000, '[') + std::string(100000, ']')),
                  {"t.json:1:65: ", "nested deeper than 64 levels"});
  expect_contains(parse_error("{\"a\": " + std::string(70, '{')),
                  {"t.json:1:70: "});  // col 1 + 6 + 63
  // Brackets inside strings (escaped quotes included) are not nesting.
  const auto t = parse_topology_json(
      doc(R"([{"type": "A", "path": ")" + std::string(100, '[') + R"(\"[[["}])", "[]"), "t.json");
  EXPECT_EQ(t.tree.module(1).path, std::string(100, '[') + "\"[[[");
}

TEST(TopologyFile, OnlyRegularFilesAreRead) {
  const fs::path dir =
      fs::temp_directory_path() / ("dmuon_topo_kinds_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string fifo = (dir / "fifo.json").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // A FIFO without a writer would block a plain read forever.
  expect_contains(input_error([&] { read_topology_file(fifo); }),
                  {"cannot read topology file '" + fifo + "'", "a FIFO", "regular file"});
  expect_contains(input_error([&] { read_topology_file(dir.string()); }),
                  {"a directory", "regular file"});
  expect_contains(input_error([&] { read_topology_file("/dev/null"); }), {"a character device"});
  expect_contains(input_error([&] { read_topology_file(""); }), {"empty"});
  // Larger than the limit: refused from its size, before anything is read (a sparse file).
  const std::string big = (dir / "big.json").string();
  std::ofstream(big).close();
  fs::resize_file(big, static_cast<std::uintmax_t>(kMaxTopologyFileBytes) + 1);
  expect_contains(input_error([&] { read_topology_file(big); }),
                  {"1073741825 bytes is larger than the limit of 1073741824 bytes"});
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dmuon::model
